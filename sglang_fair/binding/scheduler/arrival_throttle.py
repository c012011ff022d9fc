"""FairServe's overload throttle at SGLang's own refusal point for arriving requests.

Hook: ``throttle_arrivals`` AROUND ``Scheduler._abort_on_queued_limit``,
SGLang's check of an arriving request against the queue limit (the hook
table is ``binding/hooks.py``). A request SGLang lets in is checked against
the throttle (``FairSchedulePolicy.throttle``, from the KV pool's usage);
one it refuses is answered with HTTP 429 there (``refusals.refuse``; the
HTTP server keeps its ``Retry-After``: ``http/throttle_response.py``).
"""

from __future__ import annotations

import math
from http import HTTPStatus

from sglang_fair.binding.scheduler.refusals import fail_request, refuse
from sglang_fair.binding.scheduler.schedule_policy import fair_policy


def throttle_arrivals(original, scheduler, req, *args, **kwargs):
    if original(scheduler, req, *args, **kwargs):
        return True  # SGLang refused it already (queue full)
    fair = fair_policy(scheduler)
    if fair is None:
        return False
    try:
        decision = fair.throttle(req, _kv_usage(scheduler))
    except Exception as exc:  # noqa: BLE001 - one request's failure must not stop the scheduler
        fail_request(scheduler, fair, req, exc)
        return True  # the caller releases the request
    if decision is None:
        return False
    # Whole seconds: SGLang's finish-reason dicts carry str/int values only.
    refuse(scheduler, req, HTTPStatus.TOO_MANY_REQUESTS, decision.message,
           retry_after=max(1, math.ceil(decision.retry_after_s)))
    return True  # the caller releases the request, as for its own refusals


def _kv_usage(scheduler) -> float:
    """Fraction of the KV pool held by requests (evictable cached prefixes count as free)."""
    total = scheduler.max_total_num_tokens
    free = scheduler.token_to_kv_pool_allocator.available_size() + scheduler.tree_cache.evictable_size()
    return 1.0 - free / total if total else 0.0
