"""Tree-of-Thoughts on GSM8K-style questions (DLPM paper §6, Fig. 6).

A program is a tree of height ``height`` with ``branches`` children per
node; the root (the question) is not a call, so a tree has
b + b^2 + ... + b^height calls (30 for b=2, 340 for b=4, height 4, as in the
paper's Table 3). A depth-1 call's prompt is the shared ToT template, the
question and a per-branch step instruction; a deeper call extends its
parent's prompt and output with its own step instruction, and is sent only
after its parent finished. Step instructions differ between siblings so that
greedy decoding does not make siblings identical.
"""

from __future__ import annotations

from dataclasses import dataclass

from sglang_fair.workloads.context import GenContext, draw_length, positive
from sglang_fair.workloads.loaders import load_gsm8k
from sglang_fair.workloads.model import Call, Program
from sglang_fair.workloads.spec import ClientSpec, build_params


@dataclass
class ToTParams:
    height: int = 4
    branches: int = 2
    template_tokens: int = 400  # few-shot ToT instructions, shared by every program of every client
    question_tokens: int = 70  # mean GSM8K question length (synthetic questions)
    question_cv: float = 0.4
    question_scale: float = 1.0  # S2: 10x longer questions
    step_tokens: int = 16  # per-node step instruction
    thought_tokens: int = 256  # output of every node
    questions_file: str | None = None  # GSM8K jsonl: real questions, synthetic-tokenized

    def check(self) -> None:
        for name in ("height", "branches", "template_tokens", "step_tokens", "thought_tokens", "question_tokens"):
            positive(name, getattr(self, name), allow_zero=name == "template_tokens")
        positive("question_scale", self.question_scale, integer=False)
        positive("question_cv", self.question_cv, integer=False, allow_zero=True)


def calls_per_tree(height: int, branches: int) -> int:
    return sum(branches ** d for d in range(1, height + 1))


def generate(client: ClientSpec, ctx: GenContext) -> list[Program]:
    p: ToTParams = build_params(ToTParams, client.params, f"tot client {client.name!r}")
    template = ctx.ids(ctx.rng("tot-template"), p.template_tokens)
    questions = None
    if p.questions_file:
        questions = [ctx.tokenizer.encode(q) for q in load_gsm8k(p.questions_file)]
    rng = ctx.rng("tot", client.name)
    programs = []
    for k, arrival in enumerate(ctx.arrivals(client)):
        if questions:
            base = list(questions[rng.randrange(len(questions))])
        else:
            base = list(ctx.ids(rng, draw_length(rng, p.question_tokens, p.question_cv)))
        target = max(1, round(len(base) * p.question_scale))
        question = tuple(base) + ctx.ids(rng, target - len(base)) if target > len(base) else tuple(base[:target])
        calls: list[Call] = []
        frontier: list[int | None] = [None]  # parent index per node of the previous level
        for _depth in range(p.height):
            nxt: list[int | None] = []
            for parent in frontier:
                for _ in range(p.branches):
                    step = ctx.ids(rng, p.step_tokens)
                    if parent is None:
                        calls.append(Call(tokens=template + question + step, max_new_tokens=p.thought_tokens))
                    else:
                        calls.append(Call(tokens=step, max_new_tokens=p.thought_tokens,
                                          parents=(parent,), extends_parent=True))
                    nxt.append(len(calls) - 1)
            frontier = nxt
        programs.append(Program(program_id=f"{client.name}/tot{k}", client=client.name, arrival=arrival,
                                calls=tuple(calls), well_behaved=client.well_behaved, kind="tot"))
    return programs
