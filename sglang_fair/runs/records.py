"""One record per call sent, the common output of every backend.

Metrics are computed from these records only, so a live run and a simulated
run are measured the same way. Times are seconds from the start of the run.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class RequestRecord:
    rid: str
    client: str
    program_id: str
    call_index: int
    well_behaved: bool
    t_sent: float
    t_first_token: float | None
    t_done: float | None
    prompt_tokens: int
    cached_tokens: int | None  # None when the backend does not report it
    output_tokens: int
    worker: int | None = None  # data-parallel rank, when known
    error: str | None = None  # None on success; every failure is recorded, never dropped
    # Refused by the server's policy (HTTP 429, e.g. FairServe's throttling);
    # an error record with the server's Retry-After, when it gave one.
    throttled: bool = False
    retry_after_s: float | None = None
    # For auditing the fairness bounds (docs/metrics.md); None/empty when the
    # backend cannot observe them, so older run directories still load.
    t_admitted: float | None = None  # first admission into a running batch
    # [time, cumulative output tokens] after each decode step/segment or streamed chunk.
    progress: list[list[float]] | None = None
    # [retracted at, re-admitted at or None] per retraction back to the waiting queue.
    requeues: list[list[float | None]] = field(default_factory=list)
    retractions: int | None = None  # how often it was retracted, when only the count is known
    queue_time_s: float | None = None  # time spent waiting for admission, as the server reports it

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class RunResult:
    records: list[RequestRecord]
    partial: bool = False  # True when some call failed or the run was cut short
    errors: list[str] = field(default_factory=list)  # run-level problems, human readable
    meta: dict = field(default_factory=dict)  # backend facts worth keeping (url, api, policy, ...)
    # The scheduling configuration the fairness bounds depend on (sglang_fair/runs/params.py).
    params: dict = field(default_factory=dict)
