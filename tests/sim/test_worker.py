"""The simulated worker admits as SGLang's scheduler does."""

from __future__ import annotations

import random

import pytest

from sglang_fair.core import FairOptions
from sglang_fair.sim.costmodel import CostModel, load_profile
from sglang_fair.sim.worker import SimRequest, SimWorker, WorkerConfig


def _worker(policy: str, max_prefill_tokens: int) -> SimWorker:
    config = WorkerConfig(kv_pool_tokens=100_000, max_prefill_tokens=max_prefill_tokens)
    return SimWorker(0, config, FairOptions(policy=policy, quantum=1e6), CostModel(load_profile("h100-llama-3.1-8b")),
                     random.Random(0), vocab_size=1000)


@pytest.mark.parametrize("policy", ["lpm", "dlpm"])
def test_a_request_sharing_an_uncached_prefix_with_an_earlier_one_goes_last(policy: str) -> None:
    # SGLang's in-batch prefix check: b shares a's 500 uncached tokens, so c (unrelated,
    # arrived later) fills the first batch and b finds the article cached in the next.
    w = _worker(policy, max_prefill_tokens=1000)  # two 501-token prompts spend the budget
    article = list(range(500))
    for rid, prompt in (("a", article + [1]), ("b", article + [2]), ("c", list(range(600, 1100)) + [3])):
        w.enqueue(SimRequest(rid, "x", tuple(prompt), 4, 0.0))
    w.start_iteration(0.0)
    assert [r.rid for r in w.pending.prefilled] == ["a", "c"]
    w.complete()
    w.start_iteration(w.now)
    (b,) = w.pending.prefilled
    assert (b.rid, b.cached_tokens) == ("b", 500)


def test_requests_with_a_cached_prefix_keep_their_longest_prefix_order() -> None:
    w = _worker("lpm", max_prefill_tokens=1000)
    article = list(range(500))
    w.enqueue(SimRequest("a", "x", tuple(article + [1]), 1, 0.0))
    w.start_iteration(0.0)
    w.complete()  # a finished: the article is cached
    for rid, prompt in (("c", list(range(600, 1100)) + [3]), ("b", article + [2]), ("d", article + [4])):
        w.enqueue(SimRequest(rid, "x", tuple(prompt), 4, w.now))
    w.start_iteration(w.now)
    assert [r.rid for r in w.pending.prefilled] == ["b", "d", "c"]  # cached first; none held back
