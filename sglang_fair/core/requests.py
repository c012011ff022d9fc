"""The scheduler's view of one request, and per-client queue/run counts."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass


class RequestState(enum.Enum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"


@dataclass(slots=True, eq=False)
class TrackedRequest:
    """What policies see of a request; backends keep one per live request.

    ``cached_len`` is the prefix the engine found in its cache at the last
    match; LPM orders by it. ``extend_charged`` and ``output_charged`` make
    charging idempotent: a retracted request re-admitted later, or an engine
    that reports cumulative output counts, is never charged twice.
    """

    rid: str
    client: str
    input_len: int
    seq: int  # arrival order, the FCFS key
    arrival: float
    cached_len: int = 0
    state: RequestState = RequestState.QUEUED
    extend_charged: bool = False
    output_charged: int = 0
    preemptions: int = 0  # times latency isolation took its slot back
    payload: object = None  # backend's own request object, if it wants one
    # Application identity (FairServe, Justitia), all optional: ``app`` is the
    # application type, ``interaction`` one run of it (a multi-call graph,
    # unique per client), ``stage`` the call's index in that run (0 = first),
    # ``system_len`` the system-prompt tokens at the start of the prompt,
    # ``prompt`` the prompt token ids (for demand prediction).
    app: str | None = None
    interaction: str | None = None
    stage: int | None = None
    system_len: int = 0
    prompt: Sequence[int] | str | None = None


@dataclass(slots=True)
class ClientActivity:
    queued: int = 0
    running: int = 0
    last_active: float = 0.0

    @property
    def idle(self) -> bool:
        return self.queued == 0 and self.running == 0
