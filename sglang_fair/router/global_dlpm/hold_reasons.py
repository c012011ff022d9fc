"""Why a held request is still held: what the router reports (snapshot, observer, metrics)."""

from __future__ import annotations

from collections.abc import Iterator

from sglang_fair.core import FairScheduler
from sglang_fair.router.base import HOLD_REASONS
from sglang_fair.router.global_dlpm.held import HeldRequest, HeldRequests
from sglang_fair.router.global_dlpm.local_queues import LocalQueues

NO_ROOM, DEFICIT, PASSED_OVER = HOLD_REASONS


def hold_reasons(held: HeldRequests, queues: LocalQueues, fair: FairScheduler,
                 reserve_for_newcomers: bool) -> Iterator[tuple[HeldRequest, str]]:
    """Each held request and why it waits: ``no room`` (every local queue is full, the place kept
    for newcomers too when its client is one), ``deficit`` (its client's counter is spent) or
    ``passed over`` (others went first)."""
    rooms = bool(queues.rooms())
    newcomer_rooms = reserve_for_newcomers and bool(queues.newcomer_rooms())
    for client, reqs in held.by_client.items():
        room = rooms or (newcomer_rooms and fair.activity[client].running == 0)
        why = NO_ROOM if not room else DEFICIT if (fair.counter(client) or 0.0) <= 0 else PASSED_OVER
        for request in reqs.values():
            yield request, why
