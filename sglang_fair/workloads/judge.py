"""LLM-as-a-judge with branch-solve-merge (DLPM paper Table 2: ~2.7k-token
article prefix, 256-token outputs).

A program evaluates one article along ``dimensions`` criteria: one branch
call per criterion (prompt: optional extra prefix, the article, the
criterion), then one merge call sent after all branches finished. The data
model lets a call extend only one parent, so the merge prompt is the article,
a merge instruction and a length-faithful stand-in for the branch verdicts
(``dimensions x verdict_summary_tokens`` ids). S1: more dimensions; S2: an
extra 600-token prefix before each article of the misbehaving client (one
per client, like a fixed preamble).
"""

from __future__ import annotations

from dataclasses import dataclass

from sglang_fair.workloads.context import GenContext, draw_length, positive
from sglang_fair.workloads.model import Call, Program
from sglang_fair.workloads.spec import ClientSpec, build_params


@dataclass
class JudgeParams:
    article_tokens: int = 2701
    article_cv: float = 0.2
    dimensions: int = 2
    extra_prefix_tokens: int = 0  # S2: 600
    criterion_tokens: int = 32
    verdict_tokens: int = 256  # output of each branch
    merge_tokens: int = 48  # merge instruction
    verdict_summary_tokens: int = 64  # per branch, inside the merge prompt
    merge_output_tokens: int = 256

    def check(self) -> None:
        for name in ("article_tokens", "dimensions", "criterion_tokens", "verdict_tokens", "merge_tokens",
                     "merge_output_tokens"):
            positive(name, getattr(self, name))
        positive("extra_prefix_tokens", self.extra_prefix_tokens, allow_zero=True)
        positive("verdict_summary_tokens", self.verdict_summary_tokens, allow_zero=True)
        positive("article_cv", self.article_cv, integer=False, allow_zero=True)


def generate(client: ClientSpec, ctx: GenContext) -> list[Program]:
    p: JudgeParams = build_params(JudgeParams, client.params, f"judge client {client.name!r}")
    # Criteria and the merge instruction are the same for every program (one judge app).
    shared = ctx.rng("judge-shared")
    criteria = [ctx.ids(shared, p.criterion_tokens) for _ in range(p.dimensions)]
    merge_instr = ctx.ids(shared, p.merge_tokens)
    rng = ctx.rng("judge", client.name)
    extra = ctx.ids(rng, p.extra_prefix_tokens)
    programs = []
    for k, arrival in enumerate(ctx.arrivals(client)):
        article = extra + ctx.ids(rng, draw_length(rng, p.article_tokens, p.article_cv))
        calls = [Call(tokens=article + c, max_new_tokens=p.verdict_tokens) for c in criteria]
        verdicts = ctx.ids(rng, p.dimensions * p.verdict_summary_tokens)
        calls.append(Call(tokens=article + merge_instr + verdicts, max_new_tokens=p.merge_output_tokens,
                          parents=tuple(range(p.dimensions))))
        programs.append(Program(program_id=f"{client.name}/judge{k}", client=client.name, arrival=arrival,
                                calls=tuple(calls), well_behaved=client.well_behaved, kind="judge"))
    return programs
