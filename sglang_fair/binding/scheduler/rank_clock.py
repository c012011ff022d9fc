"""One clock for the tensor-parallel ranks of a worker: rank 0's, broadcast with the requests.

Every rank's scheduler holds a copy of the fair policy, whose timeouts (idle
clients, FairServe's windows, Justitia's jobs) must expire at the same point
of the event sequence on every rank; each rank's own clock reads differently.
SGLang's first rank pulls the requests and broadcasts them to the others once
per loop; when it has any, ``share_rank0_clock`` adds a ``ClockTick`` with
rank 0's time to that broadcast and takes it out on every rank, into
``process_clock()`` (a ``StampClock``: one scheduler per process, so one
clock per process), which the fair policy reads instead of its own clock
(``schedule_policy.py``). Time so moves with arrivals, which is when the
timeouts are checked (``FairScheduler.at_arrival_stamp``).

Hook: ``share_rank0_clock`` AROUND
``SchedulerRequestReceiver._broadcast_reqs_across_ranks`` (SGLang 0.5.23).
Without it (an older release, DP attention), no tick arrives and each rank
falls back to its own clock, with a warning.
"""

from __future__ import annotations

import functools
import logging
import time
from dataclasses import dataclass

from sglang_fair.binding.common.applied_hooks import registered, unapplied
from sglang_fair.core.stamp_clock import StampClock

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClockTick:
    time: float


@functools.cache
def process_clock() -> StampClock:
    """This process's share of rank 0's clock."""
    return StampClock()


def shared_clock() -> StampClock | None:
    """The clock a scheduler's fair policy reads: rank 0's where this rank has tensor-parallel
    peers and the ticks reach it, else None (its own clock)."""
    from sglang.srt.runtime_context import get_parallel

    parallel = get_parallel()
    if (getattr(parallel, "tp_size", 1) or 1) == 1:
        return None
    # The hook table carries the ticks only where SGLang has the receiver they ride on (0.5.23 on).
    ticks = [hook for hook in registered("scheduler") if hook.function is share_rank0_clock]
    if not ticks or unapplied(ticks) or getattr(parallel, "attn_dp_enabled", False):
        logger.warning("sglang-fair: no shared clock for the tensor-parallel ranks on this SGLang (or with DP "
                       "attention); each rank reads its own, so idle timeouts may expire at different times")
        return None
    logger.info("sglang-fair: tensor-parallel rank %d reads rank 0's clock", parallel.tp_rank)
    return process_clock()


def share_rank0_clock(original, receiver, recv_reqs, *args, **kwargs):
    from sglang.srt.runtime_context import get_parallel

    parallel = get_parallel()
    if parallel.tp_size == 1 or getattr(parallel, "attn_dp_enabled", False):
        return original(receiver, recv_reqs, *args, **kwargs)
    if recv_reqs:  # rank 0, with requests to pass on: its time rides along (nothing extra is sent otherwise)
        recv_reqs = [*recv_reqs, ClockTick(time.perf_counter())]
    received = original(receiver, recv_reqs, *args, **kwargs)
    ticks = [req for req in received if isinstance(req, ClockTick)]
    if not ticks:
        return received
    process_clock().observe(ticks[-1].time)
    return [req for req in received if not isinstance(req, ClockTick)]
