"""A Gateway API Inference Extension / llm-d style router: flow control, then prefix and load scorers.

Followed from kubernetes-sigs/gateway-api-inference-extension's endpoint
picker (``pkg/epp``, last tree with it: 1748e829) and llm-d/llm-d-router,
which carries it on under the same paths:

1. **Flow control** (``pkg/epp/flowcontrol/controller/internal/processor.go``):
   each client's requests wait in its own FIFO queue (the tenant is the
   ``x-gateway-inference-fairness-id`` header there; here the client id the
   binding reads); one is dispatched at a time while the pool is not
   saturated, the client chosen by a fairness policy (``flow_fairness.py``:
   ``vtc`` by default, ``round_robin``, ``global_strict``).
2. **Saturation** (``framework/plugins/flowcontrol/saturationdetector/utilization``,
   the default detector): the mean over live workers of
   ``max(waiting / queue_depth_threshold, kv_use / kv_cache_util_threshold)``
   (defaults 5 and 0.8); dispatch stops at 1.0. A worker's waiting queue is
   what it has been sent and not admitted; its KV use is estimated from the
   requests it runs over ``worker_kv_tokens`` (``placed.py``), and left out
   when that is unknown.
3. **Placement** (``pkg/epp/config/loader/defaults.go``, the default profile):
   every live worker is scored ``queue_weight`` x (max - own waiting) /
   (max - min), 1 when all are equal (``scorer/queuedepth``) + ``kv_weight``
   x (1 - KV use) (``scorer/kvcacheutilization``) + ``prefix_weight`` x the
   fraction of the prompt's ``block_tokens``-token blocks the worker caches
   (``scorer/prefix``), weights 2, 2 and 3; the highest score wins, ties
   broken at random (``picker/maxscore``), here by a seeded generator.

Simplified: one priority band (no InferenceObjective); the router sees the
workers' queues as soon as it changes them, where the picker scrapes metrics
every 50-200 ms (so it never overshoots the threshold on stale readings); the
prefix match is read from the global index that the workers' KV events keep
current (llm-d's precise prefix-cache scorer) rather than GIE's approximate
index of its own routing history; no request times out in the queue (GIE:
60 s, then 429) and no queue is capped.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from sglang_fair.core import checks
from sglang_fair.router.base import RouterSnapshot
from sglang_fair.router.flow_fairness import FAIRNESS_POLICIES, make_fairness
from sglang_fair.router.held import Held
from sglang_fair.router.idle import DEFAULT_IDLE_TIMEOUT_S, check_idle_timeout
from sglang_fair.router.late_binding import LateBindingRouter
from sglang_fair.router.radix_index import DEFAULT_CAPACITY_TOKENS


@dataclass(frozen=True)
class GIEOptions:
    fairness: str = "vtc"
    queue_depth_threshold: int = 5
    kv_cache_util_threshold: float = 0.8
    worker_kv_tokens: int | None = None  # the workers' KV pool; None: saturation reads queues only
    queue_weight: float = 2.0
    kv_weight: float = 2.0
    prefix_weight: float = 3.0
    block_tokens: int = 64  # GIE's prefix scorer floors its block size to 64 tokens
    client_weights: dict[str, float] = field(default_factory=dict)  # the VTC's per-client weights
    seed: int = 0  # of the tie breaks
    index_capacity_tokens: int = DEFAULT_CAPACITY_TOKENS
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S

    def __post_init__(self) -> None:
        checks.one_of("router fairness", self.fairness, FAIRNESS_POLICIES)
        checks.positive_int("router queue_depth_threshold", self.queue_depth_threshold)
        checks.fraction("router kv_cache_util_threshold", self.kv_cache_util_threshold)
        checks.optional_positive_int("router worker_kv_tokens", self.worker_kv_tokens)
        for name in ("queue_weight", "kv_weight", "prefix_weight"):
            checks.non_negative_number(f"router {name}", getattr(self, name))
        checks.positive_int("router block_tokens", self.block_tokens)
        object.__setattr__(self, "client_weights", checks.client_weights("router client_weights", self.client_weights))
        checks.integer("router seed", self.seed)
        checks.positive_int("router index_capacity_tokens", self.index_capacity_tokens)
        check_idle_timeout(self.idle_timeout_s)


class GIERouter(LateBindingRouter):
    name = "gie"
    options_type = GIEOptions

    def __init__(self, num_workers: int, options: GIEOptions | None = None) -> None:
        self.options = options = options or GIEOptions()
        super().__init__(num_workers, options.index_capacity_tokens, options.idle_timeout_s)
        self.fairness = make_fairness(options.fairness, options.client_weights)
        self._rng = random.Random(options.seed)

    def saturation(self) -> float:
        """The detector's reading: 1.0 or more holds every request."""
        o, waiting, kv = self.options, self.placements.waiting, self.placements.kv_tokens
        total = 0.0
        for w in self._live:
            level = waiting[w] / o.queue_depth_threshold
            if o.worker_kv_tokens is not None:
                level = max(level, kv[w] / o.worker_kv_tokens / o.kv_cache_util_threshold)
            total += level
        return total / len(self._live) if self._live else 1.0

    def _next(self) -> tuple[Held, int] | None:
        if self.saturation() >= 1.0:
            return None
        held = self.held.head(self.fairness.pick(self.held))
        self.fairness.dispatched(held)
        return held, self._pick_worker(held)

    def _pick_worker(self, held: Held) -> int:
        o, live, waiting = self.options, self._live, self.placements.waiting
        lo = min(waiting[w] for w in live)
        hi = max(waiting[w] for w in live)
        blocks = -(-len(held.tokens) // o.block_tokens) or 1
        held.match = self.index.refresh(held.match)
        lens = held.match.cached_lens(self.num_workers)
        best: list[int] = []
        best_score = -1.0
        for w in live:
            score = o.queue_weight * ((hi - waiting[w]) / (hi - lo) if hi > lo else 1.0)
            if o.worker_kv_tokens is not None:
                score += o.kv_weight * max(0.0, 1.0 - self.placements.kv_tokens[w] / o.worker_kv_tokens)
            else:
                score += o.kv_weight
            score += o.prefix_weight * (lens[w] // o.block_tokens) / blocks
            if score > best_score:
                best, best_score = [w], score
            elif score == best_score:
                best.append(w)
        return best[0] if len(best) == 1 else self._rng.choice(best)

    def snapshot(self) -> RouterSnapshot:
        state = super().snapshot()
        state.client_deficits = dict(getattr(self.fairness, "counters", {}))  # the VTC's counters
        return state

    def forget_client(self, client: str) -> None:
        if not self.held.count(client):
            self.fairness.forget(client)

    def _hold_reason(self, client: str) -> str:
        return "no room" if self.saturation() >= 1.0 else "passed over"
