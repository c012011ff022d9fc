"""Latency lanes: a few workers whose batches stay light for the clients under their fair share.

Why: beside a flood that fills every worker's batch, a light client's request
is admitted at once (DLPM, the kept place, latency isolation) but then decodes
in the flood's batch, and a decode step's cost grows with the batch and the KV
its attention reads: on the H100 profile 25-28 ms beside the flood against
7.3 ms alone, which no admission order shortens. A lane is a worker that takes
requests of the clients above their share only while everything dispatched
there and unfinished holds under ``lane_tokens`` (prompts + maximum outputs);
while those clients hold more than that per worker on the other workers (they
flood), the clients under their share are placed on a lane when one has room,
elsewhere when none has. So the lanes' decode steps stay short, and the flood
fills what the light clients leave of a lane's budget. The price is the lanes'
unused batch room: the router is no longer work-conserving for the flood.

A client that had a request within ``lane_hold_s`` still counts as sharing
the cluster, so that a flood is not let onto the lanes in the pause between
two requests of a light client: once on a lane, the flood's batch is there
until it finishes. The router asks once per placement round (``LaneView``);
requests are only passed over, never charged or refilled differently, so
Theorem G holds (docs/fairness.md).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from sglang_fair.core import checks
from sglang_fair.core.isolation import above_fair_share
from sglang_fair.core.requests import ClientActivity

# About 8% of an H100's KV pool for Llama-3.1-8B: a decode step over it costs ~1.2x one alone.
DEFAULT_LANE_TOKENS = 32768
# A client between two calls of a chain has nothing queued or running for a moment; it still
# counts among the clients sharing the cluster for this long (``lane_hold_s``), so that a flood
# alone in that moment is not let onto the lanes.
DEFAULT_LANE_HOLD_S = 1.0


def check_lane_options(num_workers: int, lane_workers: int, lane_tokens: int,
                       lane_hold_s: float = DEFAULT_LANE_HOLD_S) -> None:
    """Raise ValueError naming the bad option (``lane_workers`` 0 turns lanes off)."""
    checks.int_at_least("router lane_workers", lane_workers, 0)
    checks.int_at_least("router lane_tokens", lane_tokens, 1)
    checks.non_negative_number("router lane_hold_s (seconds)", lane_hold_s)
    if lane_workers and lane_workers >= num_workers:
        raise ValueError(f"router lane_workers must leave at least one other worker: "
                         f"{lane_workers} of {num_workers} workers")


@dataclass(frozen=True)
class LaneView:
    """What the lanes allow in one placement round."""

    lanes: frozenset[int]
    capped: Collection[str]  # the clients over their share
    left: dict[int, int]  # lane -> tokens it may still take from the clients over their share
    flooded: bool  # they hold more on the other workers than a lane allows: the others prefer lanes

    def rooms_for(self, client: str, tokens: int, rooms: Sequence[int]) -> Sequence[int]:
        """The rooms a request of ``client`` with ``tokens`` (prompt + maximum output) may take."""
        if client in self.capped:
            return [w for w in rooms if w not in self.lanes or self.left[w] >= tokens]
        if self.flooded:
            return [w for w in rooms if w in self.lanes] or rooms
        return rooms

    def holders_for(self, client: str, holders: list[int]) -> list[int]:
        """The cache holders a request of ``client`` may wait for (a capped client does not wait for a lane)."""
        return [h for h in holders if h not in self.lanes] if client in self.capped else holders


class Lanes:
    """The last ``lane_workers`` workers, and what each client holds on each worker."""

    def __init__(self, num_workers: int, lane_workers: int, lane_tokens: int = DEFAULT_LANE_TOKENS,
                 hold_s: float = DEFAULT_LANE_HOLD_S) -> None:
        check_lane_options(num_workers, lane_workers, lane_tokens, hold_s)
        if lane_workers == 0:
            raise ValueError("Lanes needs at least one lane worker")
        self.workers = frozenset(range(num_workers - lane_workers, num_workers))
        self.tokens = lane_tokens
        self.hold_s = float(hold_s)
        self._held: list[dict[str, int]] = [{} for _ in range(num_workers)]  # worker -> client -> tokens
        self._of: dict[str, tuple[int, str, int]] = {}  # rid -> (worker, client, tokens)

    def dispatched(self, rid: str, client: str, worker: int, tokens: int) -> None:
        self._of[rid] = (worker, client, tokens)
        held = self._held[worker]
        held[client] = held.get(client, 0) + tokens

    def finished(self, rid: str) -> None:
        entry = self._of.pop(rid, None)
        if entry is None:
            return
        worker, client, tokens = entry
        held = self._held[worker]
        held[client] -= tokens
        if held[client] <= 0:
            del held[client]

    def held_by(self, clients: Collection[str], worker: int) -> int:
        """Tokens ``clients`` hold on ``worker`` (prompt + maximum output of unfinished requests)."""
        held = self._held[worker]
        return sum(held.get(c, 0) for c in clients)

    def view(self, activity: Mapping[str, ClientActivity], weight_of: Callable[[str], float], now: float,
             alive: Sequence[bool], rooms: Sequence[int]) -> LaneView | None:
        """This round's limits, or None when the lanes change nothing: no client is over its
        share (counting the clients active within ``hold_s``), or no other worker is alive (the
        lanes then serve everyone)."""
        others = [w for w in range(len(alive)) if alive[w] and w not in self.workers]
        heavy = above_fair_share(activity, weight_of, now, self.hold_s) if others else set()
        if not heavy:
            return None
        left = {w: self.tokens - sum(self._held[w].values()) for w in rooms if w in self.workers}
        flooded = sum(self.held_by(heavy, w) for w in others) > self.tokens * len(others)
        return LaneView(self.workers, heavy, left, flooded)
