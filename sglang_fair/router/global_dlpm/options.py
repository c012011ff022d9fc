"""The cluster-wide DLPM router's options: one frozen dataclass, checked once when built."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from sglang_fair.core import checks
from sglang_fair.core.errors import OptionError
from sglang_fair.core.options import DEFAULT_QUANTUM
from sglang_fair.router.d2lpm import check_quantum
from sglang_fair.router.idle import DEFAULT_IDLE_TIMEOUT_S, check_idle_timeout
from sglang_fair.router.lanes import DEFAULT_LANE_HOLD_S, DEFAULT_LANE_TOKENS
from sglang_fair.router.radix_index import DEFAULT_CAPACITY_TOKENS

# About one uncached prompt per worker (each dispatch may overshoot by one prompt): the
# rest wait in the router and bind later, against fresher cache state. 8,192 (a prefill
# batch) let new prompts queue ahead of held requests whose prefixes they then evicted
# (docs/sim-trends/README.md, "The local queue").
DEFAULT_LOCAL_QUEUE_TOKENS = 2048
DEFAULT_LOCAL_QUEUE_REQUESTS = 16
# A worker admits only into free running slots (``worker_max_running``); what waits beyond them
# in its local queue is pinned to it, and at a flood's end another worker idles while it drains
# (docs/router.md, rule 1). Four more than its free slots keep its next admissions ready.
DEFAULT_QUEUE_BEYOND_FREE_SLOTS = 4
# Running requests this close to their last token (max_new less the output reported) count as
# slots about to free: a batch admitted together ends together, and with room in the local queue
# for only four more, the worker refilled it in two or three admission passes (prefills) while the
# router's next dispatches were on their way. One of the schedulers' progress reports (every 8 tokens):
# a request running to its max_new is reported once inside the window.
DEFAULT_FINISHING_TOKENS = 8
DEFAULT_CANDIDATES_PER_CLIENT = 16  # a client's oldest waiting requests considered per dispatch
DEFAULT_AFFINITY_RATIO = 1.5  # Preble's rebalance ratio


@dataclass(frozen=True)
class GlobalDLPMOptions:
    """Everything ``d2lpm_global`` takes (``--fair-router-options``; docs/router.md)."""

    quantum: float = DEFAULT_QUANTUM  # the cluster's Q^u (the workers' --fair-quantum unless set)
    input_weight: float = 1.0  # w_e: the workers' --fair-input-weight
    output_weight: float = 2.0  # w_q: the workers' --fair-output-weight
    local_queue_tokens: int = DEFAULT_LOCAL_QUEUE_TOKENS  # B: uncached prompt tokens sent and not admitted
    local_queue_requests: int = DEFAULT_LOCAL_QUEUE_REQUESTS  # R: requests sent and not admitted
    queue_beyond_free_slots: int = DEFAULT_QUEUE_BEYOND_FREE_SLOTS
    finishing_tokens: int = DEFAULT_FINISHING_TOKENS
    candidates_per_client: int = DEFAULT_CANDIDATES_PER_CLIENT
    affinity_ratio: float | None = DEFAULT_AFFINITY_RATIO  # None: no locality rules (Preble's)
    wait_for_shared_prefill: bool = True
    # The workers' --max-running-requests when known: a worker with a full batch admits
    # nothing at its next batch, so nothing should wait for its local queue.
    worker_max_running: int | None = None
    # The workers' --chunked-prefill-size when known: a prompt longer than one chunk keeps its
    # worker prefilling for several batches, which admit nothing else (``PrefillWaits``).
    worker_chunk_tokens: int | None = None
    client_weights: dict[str, float] = field(default_factory=dict)
    reserve_for_newcomers: bool = False  # on under --fair-isolation
    lane_workers: int = 0  # 0: no lanes (``router/lanes.py``)
    lane_tokens: int = DEFAULT_LANE_TOKENS
    lane_hold_s: float = DEFAULT_LANE_HOLD_S
    index_capacity_tokens: int = DEFAULT_CAPACITY_TOKENS
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S

    def __post_init__(self) -> None:
        if check_quantum(self.quantum) == math.inf:
            raise ValueError("router quantum must be finite for d2lpm_global (it is the fairness quantum)")
        self._set("quantum", float(self.quantum))
        self._set("input_weight", checks.non_negative_number("router input weight w_e", self.input_weight))
        self._set("output_weight", checks.non_negative_number("router output weight w_q", self.output_weight))
        for name in ("local_queue_tokens", "local_queue_requests", "queue_beyond_free_slots", "candidates_per_client",
                     "index_capacity_tokens"):
            checks.positive_int(f"router {name}", getattr(self, name))
        checks.int_at_least("router finishing_tokens", self.finishing_tokens, 0)
        if self.affinity_ratio is not None:
            if not checks.positive_number("router affinity_ratio", self.affinity_ratio) >= 1:
                raise OptionError(f"router affinity_ratio must be a number >= 1 or None, "
                                  f"got {self.affinity_ratio!r}")
            self._set("affinity_ratio", float(self.affinity_ratio))
        checks.boolean("router wait_for_shared_prefill", self.wait_for_shared_prefill)
        checks.boolean("router reserve_for_newcomers", self.reserve_for_newcomers)
        checks.optional_positive_int("router worker_max_running", self.worker_max_running)
        checks.optional_positive_int("router worker_chunk_tokens", self.worker_chunk_tokens)
        self._set("client_weights", checks.client_weights("router client_weights", self.client_weights))
        checks.int_at_least("router lane_workers", self.lane_workers, 0)
        checks.int_at_least("router lane_tokens", self.lane_tokens, 1)
        checks.non_negative_number("router lane_hold_s (seconds)", self.lane_hold_s)
        check_idle_timeout(self.idle_timeout_s)

    def _set(self, name: str, value: object) -> None:
        object.__setattr__(self, name, value)  # the canonical type of a value checked above
