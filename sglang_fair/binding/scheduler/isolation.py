"""Latency isolation on SGLang: the core's victim choice, released as SGLang releases its own.

With ``--fair-isolation``, a pass that has starved clients (``core/isolation.py``)
walks their requests first. When that pass starts with a full batch, SGLang's
admission would return before building an adder, so ``make_room`` (called by
the admission gate just before ``Scheduler._get_new_batch_prefill_raw``, with
the pass's starved clients: ``admission_pass.AdmissionPass``)
preempts, for each starved client the policy would admit now, the core's
victim: KV freed (``ScheduleBatch.release_req``), the batch filtered, the
request requeued through ``Scheduler._add_request_to_queue``, as
``PrefillAdder.preempt_to_schedule`` does for SGLang's priority preemption.
The pass then finds a free slot for each. A starved candidate refused for lack
of KV tokens (``AddReqResult.NO_TOKEN``) has further victims preempted, one at
a time, from inside the pass (``preempt_one``, called by ``FairPrefillAdder``).

Decode turns (``core/isolation.py``, ``DecodeTurns``): the gate counts what
each pass prefilled (``after_pass``) and, once a chunk's worth
(``--chunked-prefill-size``) has run since the running batch last decoded
while a light client runs, skips the next pass (``decode_turn``) so that
SGLang decodes the running batch. Also between two chunks of one long
prompt, as SGLang's own ``prefill_decode_interval`` defers a pass: the chunk
computed so far stays stashed (``Scheduler.stash_chunked_request`` runs
again only past what it cached) and the next pass continues it.
"""

from __future__ import annotations

from collections.abc import Set

from sglang_fair.binding.common import sglang_private
from sglang_fair.binding.scheduler.schedule_policy import FairSchedulePolicy


def starved_clients(fair: FairSchedulePolicy, running_batch) -> Set[str]:
    """Clients this pass offers room first (the core's starved clients; empty
    without isolation or with nothing running)."""
    isolation = fair.fair.isolation
    if isolation is None or running_batch is None or running_batch.is_empty():
        return set()
    return isolation.starved_clients()


def decode_turn(scheduler, fair: FairSchedulePolicy, running_batch) -> bool:
    """Whether to skip this pass, so that the running batch decodes before the next prefill (a turn taken)."""
    turns = _decode_turns(scheduler, fair)
    if turns is None or running_batch is None or running_batch.is_empty() or not turns.due():
        return False
    turns.take()
    return True


def after_pass(scheduler, fair: FairSchedulePolicy, new_batch) -> None:
    """Count the tokens a pass prefilled; a pass with no batch (SGLang decodes next) or a mixed one
    (its prefill decodes the running batch too) starts the count again."""
    turns = _decode_turns(scheduler, fair)
    if turns is None:
        return
    if new_batch is None or getattr(new_batch, "decoding_reqs", None):
        turns.after_decode()
    else:
        turns.after_prefill(new_batch.extend_num_tokens)  # set by ScheduleBatch.prepare_for_extend


def _decode_turns(scheduler, fair: FairSchedulePolicy):
    if fair.fair.isolation is None:
        return None
    # SGLang sets chunked_prefill_size to None when chunking is off; one pass then prefills at most this.
    return fair.decode_turns(scheduler.chunked_prefill_size or scheduler.max_prefill_tokens)


def batch_full(scheduler, running_batch) -> bool:
    """No free slot, or the last pass ran out of KV tokens: only preemption makes room."""
    return running_batch.batch_is_full or scheduler.get_num_allocatable_reqs(
        len(running_batch.reqs), running_batch=running_batch) <= 0


def make_room(scheduler, fair: FairSchedulePolicy, running_batch, starved: Set[str]) -> int:
    """Before a pass that starts full: one victim preempted for each ``starved`` client whose
    request the policy's walk offers now. Returns how many were preempted."""
    waiting = [tracked for tracked in map(fair.track, scheduler.waiting_queue) if tracked.client in starved]
    first: dict[str, object] = {}
    for tracked in fair.fair.walk(waiting):  # nothing is admitted: each starved request is offered once
        first.setdefault(tracked.client, tracked)
    preempted = 0
    for candidate in first.values():
        victim = _victim(fair, running_batch.reqs, candidate)
        if victim is None:
            continue
        _release(running_batch, victim)
        fair.fair.preempt(fair.fair.requests[victim.rid])
        sglang_private.add_request_to_queue(scheduler, victim)
        preempted += 1
    if preempted:
        sglang_private.mark_batch_not_full(running_batch)
    return preempted


def preempt_one(adder, fair: FairSchedulePolicy, req) -> bool:
    """Release the core's next victim for ``req`` from ``adder``'s running batch, within a pass.

    Returns False when no running request may be preempted for it.
    """
    batch = adder.running_batch
    victim = _victim(fair, [r for r in batch.reqs if r not in adder.preempt_list], fair.track(req))
    if victim is None:
        return False
    # As PrefillAdder.preempt_to_schedule: drop its reserved decode budget; SGLang requeues preempt_list.
    sglang_private.give_back_decode_budget(adder, victim)
    _release(batch, victim)
    adder.preempt_list.append(victim)
    fair.fair.preempt(fair.fair.requests[victim.rid])
    return True


def _victim(fair: FairSchedulePolicy, running: list, candidate):
    """The running SGLang request the core picks to preempt for ``candidate`` (tracked), or None."""
    live = {r.rid: r for r in running if not r.finished()}
    tracked = (t for t in map(fair.fair.requests.get, live) if t is not None)
    victim = fair.fair.isolation.next_victim(candidate, tracked)
    return None if victim is None else live[victim.rid]


def _release(batch, req) -> None:
    """Free ``req``'s KV and drop it from ``batch``, as SGLang's preemption does."""
    index = batch.reqs.index(req)
    batch.release_req(index, len(batch.reqs) - 1)
    batch.filter_batch(keep_indices=[i for i in range(len(batch.reqs)) if i != index])
