"""D²LPM: double-deficit longest-prefix-match routing (DLPM paper §5.2, Algorithm 2).

Each (client, worker) pair has a deficit counter. A request goes to the
least-loaded worker that both holds the longest cached match of its prompt and
still has positive deficit for its client; failing that, to the least-loaded
worker with positive deficit. When none of a client's workers is positive,
all of them are refilled by Q^w. Dispatch charges ``w_e * input`` and a
completion ``w_q * output`` to the worker that ran it. The counters bound how
long a client may stick to the workers caching its prefixes, so a backlogged
client ends up backlogged on every worker and the local DLPM of each worker
keeps clients within the Theorem 5.1 bound.

Q^w = infinity is accepted for experiments: it disables the deficit and turns
the router into pure locality + least-loaded, which is unfair (Theorem A.5).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from sglang_fair.core import checks
from sglang_fair.router.base import Dispatch, RouterSnapshot
from sglang_fair.router.idle import DEFAULT_IDLE_TIMEOUT_S
from sglang_fair.router.indexed import IndexedRouter
from sglang_fair.router.radix_index import DEFAULT_CAPACITY_TOKENS

DEFAULT_WORKER_QUANTUM = 10_000.0  # middle of the paper's Q^w sweep (2,000 .. 40,000)


def check_quantum(quantum: float) -> float:
    if quantum == math.inf:  # Q^w = infinity: placement by locality and load alone (the paper's ablation)
        return math.inf
    return checks.positive_number("router quantum Q^w", quantum)


def check_weight(name: str, value: float) -> float:
    return checks.non_negative_number(f"router {name}", value)


class D2LPMRouter(IndexedRouter):
    name = "d2lpm"

    def __init__(
        self,
        num_workers: int,
        quantum: float = DEFAULT_WORKER_QUANTUM,
        input_weight: float = 1.0,
        output_weight: float = 2.0,
        index_capacity_tokens: int = DEFAULT_CAPACITY_TOKENS,
        idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S,
    ) -> None:
        super().__init__(num_workers, index_capacity_tokens, idle_timeout_s)
        self.quantum = check_quantum(quantum)
        self.input_weight = check_weight("input weight w_e", input_weight)
        self.output_weight = check_weight("output weight w_q", output_weight)
        if self.input_weight == 0 and self.output_weight == 0:
            raise ValueError("router input and output weights cannot both be 0")
        # q_{i,w}: client -> one counter per worker, all starting at 0 (Algorithm 2).
        self.deficits: dict[str, list[float]] = {}
        self.refills = 0  # how many times some client's counters were refilled

    def snapshot(self) -> RouterSnapshot:
        state = super().snapshot()
        state.deficits = {client: list(q) for client, q in self.deficits.items()}
        return state

    def route(self, rid: str, client: str, tokens: Sequence[int], max_new_tokens: int) -> int:
        live = self.live_workers()
        match = self.index.match(tokens)
        worker = self._select(match.workers if match.length else 0, client, live)
        self.deficits[client][worker] -= self.input_weight * len(tokens)
        self._record(rid, client, worker, len(tokens))
        self.index.insert(tokens, worker, after=match)
        return worker

    def _select(self, holders: int, client: str, live: Sequence[int]) -> int:
        q = self.deficits.get(client)
        if q is None:
            q = self.deficits[client] = [0.0] * self.num_workers
        avail = [w for w in live if q[w] > 0]
        if not avail:
            # Refill all of the client's workers as many rounds as the loop in
            # Algorithm 2 would, in one step: just enough to make one positive.
            best = max(q[w] for w in live)
            rounds = math.floor(-best / self.quantum) + 1 if math.isfinite(self.quantum) else 1
            for w in range(self.num_workers):
                q[w] += rounds * self.quantum
            self.refills += 1
            avail = [w for w in live if q[w] > 0]
        if holders:
            avail = [w for w in avail if holders >> w & 1] or avail
        return self.least_loaded(avail)

    def forget_client(self, client: str) -> None:
        # Idle for idle_timeout_s: it returns with fresh counters, like a new client.
        self.deficits.pop(client, None)

    def _finished(self, rid: str, dispatch: Dispatch, output_tokens: int) -> None:
        q = self.deficits.get(dispatch.client)
        if q is not None:
            q[dispatch.worker] -= self.output_weight * output_tokens
