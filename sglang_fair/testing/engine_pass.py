"""One prefill admission pass with SGLang's real classes, in-process (tests and benchmarks).

It reproduces the policy-dependent part of
``Scheduler._get_new_batch_prefill_raw``: ``calc_priority`` on the waiting
queue, then the admission loop (``init_next_round_input``, ``add_one_req``,
stop at the first non-CONTINUE result), through the same classes the
sglang-fair hooks install in a live server. Needs SGLang's runtime context
(``publish_test_runtime``) and the plugin hooks applied.
"""

from __future__ import annotations

import contextlib
from array import array
from collections.abc import Sequence
from types import SimpleNamespace


def publish_test_runtime() -> None:
    """Publish a runtime context and apply the sglang-fair hooks in this process."""
    from sglang.srt.plugins.hook_registry import HookRegistry
    from sglang.srt.runtime_context import SpawnRanks, publish, reset_context
    from sglang.srt.server_args import ServerArgs

    from sglang_fair.binding import plugin

    reset_context()
    publish(ServerArgs(model_path="dummy"), role="test", ranks=SpawnRanks(world_rank=0, dp_rank=None))
    plugin.register()
    HookRegistry.apply_hooks()


def make_req(rid: str, ids: Sequence[int], client: str | None, max_new: int = 4):
    from sglang.srt.managers.schedule_batch import Req
    from sglang.srt.sampling.sampling_params import SamplingParams

    params = SamplingParams(max_new_tokens=max_new)
    params.normalize(None)
    return Req(rid, "", array("q", ids), params, routing_key=client)


def make_cache(cached_prefixes: Sequence[Sequence[int]], pool_tokens: int = 1 << 20):
    """A RadixCache (real allocator on CPU) that already holds ``cached_prefixes``."""
    import torch
    from sglang.srt.mem_cache.allocator import TokenToKVPoolAllocator
    from sglang.srt.mem_cache.base_prefix_cache import InsertParams
    from sglang.srt.mem_cache.radix_cache import RadixCache, RadixKey

    alloc = TokenToKVPoolAllocator(size=pool_tokens, dtype=torch.float16, device="cpu", kvcache=None, need_sort=False)
    tree = RadixCache.create_simulated(mock_allocator=alloc)
    for prefix in cached_prefixes:
        tree.insert(InsertParams(key=RadixKey(token_ids=array("q", prefix)), value=alloc.alloc(len(prefix))))
    return tree, alloc


def make_policy(name: str, tree):
    """SGLang's ``SchedulePolicy`` as the live scheduler builds it (ours, once hooked)."""
    from sglang.srt.managers.schedule_policy import SchedulePolicy

    return SchedulePolicy(name, tree, False, False, False)


def enqueue(policy, reqs) -> None:
    """What the ``_add_request_to_queue`` hook does for each arrival."""
    for req in reqs:
        policy.on_queued(req)


def admission_pass(policy, tree, alloc, queue: list, rem_input_tokens: int, rem_chunk_tokens: int | None = None) -> list:
    """Order ``queue`` and admit from it as the stock loop does; returns the admitted reqs.

    A fair policy's pass is opened on it as the admission gate does, and the adder
    built through the factory SGLang's ``get_prefill_adder_class`` hook returns."""
    from sglang.srt.managers.schedule_batch import ScheduleBatch
    from sglang.srt.managers.schedule_policy import AddReqResult, PrefillAdder

    from sglang_fair.binding.scheduler.admission_pass import AdmissionPass
    from sglang_fair.binding.scheduler.prefill_adder import fair_prefill_adder
    from sglang_fair.binding.scheduler.schedule_policy import FairSchedulePolicy

    fair = isinstance(policy, FairSchedulePolicy)
    with policy.admitting(AdmissionPass()) if fair else contextlib.nullcontext():
        policy.calc_priority(queue)  # a gated policy's walk starts here, on this list
        adder_cls = fair_prefill_adder(PrefillAdder, SimpleNamespace(policy=policy))
        adder = adder_cls(1, tree, alloc, ScheduleBatch(reqs=[]), 0.5, rem_input_tokens, rem_chunk_tokens)
        for req in queue:
            req.init_next_round_input(tree)
            if adder.add_one_req(req, has_chunked_req=False, truncation_align_size=None) != AddReqResult.CONTINUE:
                break
    return list(adder.can_run_list)
