"""Long-context QA, LooGLE-like (DLPM paper Table 2: ~21k-token documents,
~15-token answers).

A program is one document asked ``num_questions`` questions at once; each
call's prompt is the document followed by its question, so the calls share
the document as prefix. S2 doubles the misbehaving client's documents
(``doc_scale: 2``); S1 gives it a higher program rate.
"""

from __future__ import annotations

from dataclasses import dataclass

from sglang_fair.workloads.context import GenContext, draw_length, positive
from sglang_fair.workloads.loaders import load_loogle
from sglang_fair.workloads.model import Call, Program
from sglang_fair.workloads.spec import ClientSpec, build_params


@dataclass
class QAParams:
    doc_tokens: int = 21449  # mean document length (synthetic documents)
    doc_cv: float = 0.3
    doc_scale: float = 1.0  # S2: 2x longer documents
    num_questions: int = 8
    question_tokens: int = 24
    answer_tokens: int = 15
    documents_file: str | None = None  # LooGLE jsonl: real documents and questions, synthetic-tokenized

    def check(self) -> None:
        for name in ("doc_tokens", "num_questions", "question_tokens", "answer_tokens"):
            positive(name, getattr(self, name))
        positive("doc_scale", self.doc_scale, integer=False)
        positive("doc_cv", self.doc_cv, integer=False, allow_zero=True)


def generate(client: ClientSpec, ctx: GenContext) -> list[Program]:
    p: QAParams = build_params(QAParams, client.params, f"qa client {client.name!r}")
    docs = load_loogle(p.documents_file) if p.documents_file else None
    rng = ctx.rng("qa", client.name)
    programs = []
    for k, arrival in enumerate(ctx.arrivals(client)):
        if docs:
            d = docs[rng.randrange(len(docs))]
            doc = tuple(ctx.tokenizer.encode(d.text))
            questions = [tuple(ctx.tokenizer.encode(q)) for q in d.questions[: p.num_questions]]
        else:
            doc = ctx.ids(rng, draw_length(rng, p.doc_tokens, p.doc_cv))
            questions = [ctx.ids(rng, p.question_tokens) for _ in range(p.num_questions)]
        target = max(1, round(len(doc) * p.doc_scale))
        doc = doc + ctx.ids(rng, target - len(doc)) if target > len(doc) else doc[:target]
        calls = tuple(Call(tokens=doc + q, max_new_tokens=p.answer_tokens) for q in questions)
        programs.append(Program(program_id=f"{client.name}/qa{k}", client=client.name, arrival=arrival,
                                calls=calls, well_behaved=client.well_behaved, kind="qa"))
    return programs
