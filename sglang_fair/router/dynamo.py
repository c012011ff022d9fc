"""An NVIDIA Dynamo style KV router: a policy queue with weighted deficit round-robin, then KV-overlap cost.

Followed from ai-dynamo/dynamo's ``lib/kv-router/src/scheduling/``:

1. **When to queue** (``queue.rs``, ``SchedulerQueueActor::handle_enqueue``;
   ``policy_config.rs``, ``worker_is_busy``): a worker is busy while its
   active prefill tokens (uncached prompt tokens of the requests sent to it
   whose first token has not come) exceed ``queue_threshold`` x its batched
   tokens (``worker_batched_tokens``: SGLang's ``--max-prefill-tokens``,
   16,384 by default). A request waits in the router when every live worker
   is busy or its client already has requests waiting (no overtaking its
   own backlog); otherwise it is placed at once, uncharged. Waiting requests
   are released after a first token or a completion, while some worker is
   not busy. ``queue_threshold`` None never queues.
2. **Which client next** (``policy_queue.rs``, ``PolicyQueue::pop_next``):
   each client is a class with a deficit; from the cursor, a class whose
   head costs at most its deficit goes, else it earns its quantum
   (``quantum`` x its weight) and goes if that pays; if a whole round pops
   nothing, every class earns as many quanta as the cheapest head still
   needs. A request costs its uncached prompt tokens at the best worker when
   it arrived (at least 1), charged at dispatch; a class whose queue empties
   drops its deficit. The cursor stays on a class while its next head is
   affordable. Inside a class: first come, first served.
3. **Which worker** (``selector.rs``, ``DefaultWorkerSelector``, temperature
   0): the least ``overlap_score_weight`` x prefill blocks + decode blocks,
   where prefill blocks = (active prefill tokens + the prompt's tokens not
   cached there) / block size and decode blocks = the distinct prompt blocks
   of the requests active there, counting this one's; ties to the worker
   whose index holds fewest tokens, then at random (seeded).

Simplified: one class per client with equal quanta (Dynamo's classes come
from a header and a YAML file, per request family and size bucket, with no
defaults: 512 is its guide's example quantum); the default threshold is 4.0,
the documented default of its releases (some versions ship none, one 16);
the cached prefix is read from the global index fed by KV events, in tokens
(Dynamo matches hashed blocks); admission reports correct a request's
uncached tokens; no queue limits (Dynamo's default: none either).
"""

from __future__ import annotations

import math
import random
from collections import deque
from dataclasses import dataclass, field

from sglang_fair.core import checks
from sglang_fair.router.base import Dispatch, RouterSnapshot
from sglang_fair.router.held import Held, HeldQueues
from sglang_fair.router.idle import DEFAULT_IDLE_TIMEOUT_S, check_idle_timeout
from sglang_fair.router.late_binding import LateBindingRouter
from sglang_fair.router.radix_index import DEFAULT_CAPACITY_TOKENS, PACKED_TOKEN_BYTES

SGLANG_MAX_PREFILL_TOKENS = 16384  # SGLang's --max-prefill-tokens default


@dataclass(frozen=True)
class DynamoOptions:
    quantum: int = 512
    client_weights: dict[str, float] = field(default_factory=dict)
    queue_threshold: float | None = 4.0
    worker_batched_tokens: int = SGLANG_MAX_PREFILL_TOKENS
    overlap_score_weight: float = 1.0
    block_tokens: int = 64
    seed: int = 0
    index_capacity_tokens: int = DEFAULT_CAPACITY_TOKENS
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S

    def __post_init__(self) -> None:
        checks.positive_int("router quantum", self.quantum)
        object.__setattr__(self, "client_weights", checks.client_weights("router client_weights", self.client_weights))
        if self.queue_threshold is not None:
            checks.non_negative_number("router queue_threshold", self.queue_threshold)
        checks.positive_int("router worker_batched_tokens", self.worker_batched_tokens)
        checks.non_negative_number("router overlap_score_weight", self.overlap_score_weight)
        checks.positive_int("router block_tokens", self.block_tokens)
        checks.integer("router seed", self.seed)
        checks.positive_int("router index_capacity_tokens", self.index_capacity_tokens)
        check_idle_timeout(self.idle_timeout_s)


class DeficitRoundRobin:
    """Dynamo's ``PolicyQueue`` over clients: the ring of backlogged clients, the front its cursor."""

    def __init__(self, quantum: int, weights: dict[str, float]) -> None:
        self.quantum, self.weights = quantum, weights
        self.ring: deque[str] = deque()
        self.deficits: dict[str, float] = {}

    def backlogged(self, client: str) -> None:
        if client not in self.deficits:
            self.ring.append(client)
            self.deficits[client] = 0.0

    def emptied(self, client: str) -> None:
        if self.deficits.pop(client, None) is not None:
            self.ring.remove(client)

    def pick(self, queues: HeldQueues) -> str:
        ring, deficits = self.ring, self.deficits
        for i, client in enumerate(ring):
            cost = queues.head(client).cost
            if cost > deficits[client]:
                deficits[client] += self._quantum(client)
            if cost <= deficits[client]:
                ring.rotate(-i)
                return client
        rounds = min(math.ceil((queues.head(c).cost - deficits[c]) / self._quantum(c)) for c in ring)
        for client in ring:
            deficits[client] += rounds * self._quantum(client)
        for i, client in enumerate(ring):
            if queues.head(client).cost <= deficits[client]:
                ring.rotate(-i)
                return client
        raise AssertionError("a bulk round leaves some head affordable")

    def dispatched(self, held: Held, queues: HeldQueues) -> None:
        """``held`` (the picked client's head) left its queue: charge it, move the cursor."""
        client = held.client
        if not queues.count(client):
            self.emptied(client)
            return
        self.deficits[client] = max(0.0, self.deficits[client] - held.cost)
        if queues.head(client).cost > self.deficits[client]:
            self.ring.rotate(-1)

    def _quantum(self, client: str) -> float:
        return self.quantum * self.weights.get(client, 1.0)


class DynamoRouter(LateBindingRouter):
    name = "dynamo"
    options_type = DynamoOptions

    def __init__(self, num_workers: int, options: DynamoOptions | None = None) -> None:
        self.options = options = options or DynamoOptions()
        super().__init__(num_workers, options.index_capacity_tokens, options.idle_timeout_s)
        self.drr = DeficitRoundRobin(options.quantum, options.client_weights)
        self._direct: Held | None = None  # arrived with nothing to queue behind: placed at once, uncharged
        self._picked: Held | None = None  # the DRR's pick being placed
        self._blocks: dict[str, list[int]] = {}  # rid -> its prompt's chained block hashes
        self._active: list[dict[int, int]] = [{} for _ in range(num_workers)]  # block hash -> active requests
        self._rng = random.Random(options.seed)

    def busy(self) -> bool:
        """Every live worker's active prefill is past the threshold."""
        threshold = self.options.queue_threshold
        if threshold is None:
            return False
        limit = threshold * self.options.worker_batched_tokens
        return all(self.placements.prefill_tokens[w] > limit for w in self._live)

    def _arrived(self, held: Held) -> None:
        lens = held.match.cached_lens(self.num_workers)
        held.cost = max(1, len(held.tokens) - max(lens[w] for w in self._live))
        self._blocks[held.rid] = _block_hashes(held.match.packed, self.options.block_tokens)
        if self.held.count(held.client) or self.busy():
            self.drr.backlogged(held.client)
        else:
            self._direct = held

    def _next(self) -> tuple[Held, int] | None:
        if self._direct is not None:
            held, self._direct = self._direct, None
            return held, self._pick_worker(held)
        if self.busy():
            return None
        held = self._picked = self.held.head(self.drr.pick(self.held))
        return held, self._pick_worker(held)

    def _pick_worker(self, held: Held) -> int:
        o = self.options
        block = o.block_tokens
        held.match = self.index.refresh(held.match)
        lens = held.match.cached_lens(self.num_workers)
        blocks = self._blocks[held.rid]
        n = len(held.tokens)
        best: list[int] = []
        best_key: tuple[float, int] | None = None
        for w in self._live:
            active = self._active[w]
            prefill = (self.placements.prefill_tokens[w] + n - (lens[w] // block) * block) / block
            decode = len(active) + sum(1 for h in blocks if h not in active)
            key = (o.overlap_score_weight * prefill + decode, self.index.worker_tokens[w])
            if best_key is None or key < best_key:
                best, best_key = [w], key
            elif key == best_key:
                best.append(w)
        return best[0] if len(best) == 1 else self._rng.choice(best)

    def _placing(self, held: Held, worker: int, cached: int) -> None:
        if held is self._picked:  # out of its queue now: the DRR charges it and looks at the next head
            self._picked = None
            self.drr.dispatched(held, self.held)
        active = self._active[worker]
        for h in self._blocks[held.rid]:
            active[h] = active.get(h, 0) + 1

    def _withdrawn(self, held: Held) -> None:
        self._blocks.pop(held.rid, None)
        if not self.held.count(held.client):
            self.drr.emptied(held.client)

    def _finished(self, rid: str, dispatch: Dispatch, output_tokens: int) -> None:
        super()._finished(rid, dispatch, output_tokens)
        active = self._active[dispatch.worker]
        for h in self._blocks.pop(rid, ()):
            left = active.get(h, 0) - 1
            if left > 0:
                active[h] = left
            else:
                active.pop(h, None)

    def on_worker_down(self, worker: int) -> list[str]:
        lost = [rid for rid, d in self.inflight.items() if d.worker == worker]
        for rid in lost:
            self._blocks.pop(rid, None)
        self._active[worker] = {}
        return super().on_worker_down(worker)

    def snapshot(self) -> RouterSnapshot:
        state = super().snapshot()
        state.client_deficits = dict(self.drr.deficits)  # of the clients with requests queued
        return state

    def _hold_reason(self, client: str) -> str:
        return "no room" if self.busy() else "deficit"


def _block_hashes(packed: bytes, block_tokens: int) -> list[int]:
    """Chained hashes of the prompt's full blocks (a partial last block is not a block)."""
    step = block_tokens * PACKED_TOKEN_BYTES
    out, h = [], 0
    for start in range(0, len(packed) - step + 1, step):
        h = hash((h, packed[start:start + step]))
        out.append(h)
    return out

