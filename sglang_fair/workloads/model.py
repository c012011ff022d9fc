"""The workload data model every backend replays (live server or simulator).

A workload is a list of programs; a program is a small DAG of calls owned by
one client. A call is sent only when all its parents have finished (closed
loop, as in the DLPM paper's Tree-of-Thoughts). Its prompt is built at run
time: when ``extends_parent`` is set, the prompt starts with the first
parent's full prompt and generated output (which only the server knows), then
``tokens`` follow; otherwise the prompt is ``tokens`` alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Call:
    tokens: tuple[int, ...]  # own prompt tokens (appended after the parent's, if any)
    max_new_tokens: int
    parents: tuple[int, ...] = ()  # indices of calls of the same program
    extends_parent: bool = False
    # Force the output length (ignore EOS) so that runs are comparable.
    ignore_eos: bool = True


@dataclass(frozen=True)
class Program:
    program_id: str
    client: str
    arrival: float  # seconds from the start of the run
    calls: tuple[Call, ...]
    well_behaved: bool = True
    kind: str = ""  # e.g. "tot", "qa", "judge", "chat", "synthetic"

    def roots(self) -> list[int]:
        return [i for i, c in enumerate(self.calls) if not c.parents]


@dataclass
class Workload:
    name: str
    programs: list[Program]
    seed: int | None = None
    meta: dict = field(default_factory=dict)

    @property
    def clients(self) -> list[str]:
        return sorted({p.client for p in self.programs})

    def well_behaved_clients(self) -> dict[str, bool]:
        """Per client: whether every program it sends is well-behaved (what metrics judge it as)."""
        flags: dict[str, bool] = {}
        for p in self.programs:
            flags[p.client] = flags.get(p.client, True) and p.well_behaved
        return dict(sorted(flags.items()))

    def num_calls(self) -> int:
        return sum(len(p.calls) for p in self.programs)
