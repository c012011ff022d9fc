"""Latency isolation on SGLang: the core's victim choice, SGLang's own preemption path.

SGLang 0.5.23 already preempts running requests for priority scheduling
(``PrefillAdder.preempt_to_schedule``, called from
``Scheduler._get_new_batch_prefill_raw`` when the batch has no free slot, with
``Scheduler.enable_priority_preemption`` on). With ``--fair-isolation``, every
pass walks the starved clients' requests first (``core/isolation.py``); a pass
that starts with a full batch also turns that switch on for the pass, and our
adder (``prefill_adder.FairPrefillAdder``) answers ``preempt_to_schedule``
with the core's victims, released as SGLang releases its own: KV freed
(``ScheduleBatch.release_req``), the batch filtered, the request requeued by
the scheduler from ``adder.preempt_list``. A candidate refused for lack of KV
tokens (``AddReqResult.NO_TOKEN``) gets the same, one victim at a time.
"""

from __future__ import annotations

from sglang_fair.binding.scheduler.schedule_policy import FairSchedulePolicy


def starved_clients(fair: FairSchedulePolicy, running_batch) -> set[str]:
    """Clients this pass offers room first (the core's starved clients; empty
    without isolation or with nothing running)."""
    isolation = fair.fair.isolation
    if isolation is None or running_batch is None or running_batch.is_empty():
        return set()
    return isolation.starved_clients()


def batch_full(scheduler, running_batch) -> bool:
    """No free slot, or the last pass ran out of KV tokens: only preemption makes room."""
    return running_batch.batch_is_full or scheduler.get_num_allocatable_reqs(
        len(running_batch.reqs), running_batch=running_batch) <= 0


def preempt_one(adder, fair: FairSchedulePolicy, req) -> bool:
    """Release the core's next victim for ``req`` from ``adder``'s running batch.

    Returns False when no running request may be preempted for it.
    """
    batch = adder.running_batch
    live = {r.rid: r for r in batch.reqs if r not in adder.preempt_list and not r.finished()}
    tracked = (t for t in map(fair.fair.requests.get, live) if t is not None)
    victim = fair.fair.isolation.next_victim(fair.track(req), tracked)
    if victim is None:
        return False
    engine_req = live[victim.rid]
    index = batch.reqs.index(engine_req)
    # As PrefillAdder.preempt_to_schedule: drop its reserved decode budget, free its KV, filter the batch.
    adder.memory_budget.total_offset -= adder._get_running_request_total_token_offset(engine_req)
    batch.release_req(index, len(batch.reqs) - 1)
    batch.filter_batch(keep_indices=[i for i in range(len(batch.reqs)) if i != index])
    adder.preempt_list.append(engine_req)
    fair.fair.preempt(victim)
    return True
