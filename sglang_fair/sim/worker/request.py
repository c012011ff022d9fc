"""What a simulated worker holds of each request, and what one iteration hands back."""

from __future__ import annotations

from dataclasses import dataclass, field

from sglang_fair.core import TrackedRequest
from sglang_fair.sim.radix import Node


@dataclass(eq=False)
class SimRequest:
    rid: str
    client: str
    prompt: tuple[int, ...]
    max_new: int
    t_arrival: float
    tag: object = None  # the backend's handle (program, call index)
    # Application identity (FairServe, Justitia): app type, interaction id, call index.
    app: str | None = None
    interaction: str | None = None
    stage: int | None = None
    retry_after_s: float | None = None  # set when the policy refused it
    worker: int | None = None
    out: int = 0  # tokens generated so far
    output_ids: tuple[int, ...] = ()
    cached_tokens: int | None = None  # cache hit at first admission
    t_first_token: float | None = None
    t_done: float | None = None
    tracked: TrackedRequest | None = None
    node: Node | None = None  # locked radix node (prefix protected while running)
    computed: int = 0  # tokens of fill with KV (tree + private) while admitted
    private: int = 0  # KV slots held outside the tree (decode outputs, pending prefill)
    target: int = 0  # fill length this admission prefills to
    # Audit trail for the records (RequestRecord.t_admitted, progress, requeues).
    t_admitted: float | None = None
    progress: list[list[float]] = field(default_factory=list)
    requeues: list[list[float | None]] = field(default_factory=list)

    def admitted_at(self, t: float) -> None:
        if self.t_admitted is None:
            self.t_admitted = t
        elif self.requeues and self.requeues[-1][1] is None:  # back in a batch after a retraction
            self.requeues[-1][1] = t

    def requeued_at(self, t: float) -> None:
        """Sent back to the queue (retracted or preempted); ``admitted_at`` closes the entry."""
        self.requeues.append([t, None])

    def produced_at(self, t: float) -> None:
        self.progress.append([t, self.out])

    def fill(self) -> tuple[int, ...]:
        """What a prefill must cover: prompt plus the outputs kept over a retraction."""
        return self.prompt + self.output_ids[: self.out] if self.out else self.prompt


@dataclass
class IterationResult:
    end: float
    finished: list[SimRequest] = field(default_factory=list)
    prefilled: list[SimRequest] = field(default_factory=list)  # first token or prompt now cached
    decoded: list[SimRequest] = field(default_factory=list)  # running rows a mixed prefill decoded one step
    start: float = 0.0  # when the iteration began (a mixed row waited from here to ``end``)
