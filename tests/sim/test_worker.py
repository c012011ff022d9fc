"""The simulated worker admits as SGLang's scheduler does."""

from __future__ import annotations

import random

import pytest

from sglang_fair.core import FairOptions
from sglang_fair.sim.costmodel import CostModel, load_profile
from sglang_fair.sim.worker import SimRequest, SimWorker, WorkerConfig


def _worker(policy: str, max_prefill_tokens: int, **options: object) -> SimWorker:
    config = WorkerConfig(kv_pool_tokens=100_000, max_prefill_tokens=max_prefill_tokens, **options)
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


def _decode_while_a_long_prompt_prefills(mixed: bool) -> tuple[SimWorker, SimRequest, list[tuple[int, int]]]:
    """``a`` is decoding when a 5,000-token prompt arrives; returns, after each iteration until the
    long prompt has its first token, a's output count and how far the prompt is prefilled."""
    w = _worker("fcfs", max_prefill_tokens=16384, chunked_prefill_size=1024, enable_mixed_chunk=mixed)
    a = SimRequest("a", "x", tuple(range(100)), 50, 0.0)
    w.enqueue(a)
    w.start_iteration(0.0)
    w.complete()  # a prefilled: one token, now running
    long = SimRequest("long", "y", tuple(range(1000, 6000)), 4, w.now)
    w.enqueue(long)
    outs = []
    while long.t_first_token is None:
        w.start_iteration(w.now)
        w.complete()
        outs.append((a.out, long.computed))
    return w, a, outs


def test_without_mixed_chunks_a_running_request_waits_for_a_whole_chunked_prefill() -> None:
    # SGLang runs a prefill whenever it can: five 1,024-token chunks in a row, no decode between.
    _, _, outs = _decode_while_a_long_prompt_prefills(mixed=False)
    assert outs == [(1, 1024), (1, 2048), (1, 3072), (1, 4096), (1, 5000)]


def test_mixed_chunks_decode_the_running_batch_in_every_prefill() -> None:
    w, a, outs = _decode_while_a_long_prompt_prefills(mixed=True)
    # The running row takes one token of each chunk's budget (1,023 prompt tokens a chunk: still
    # five chunks), and a decodes one token in each.
    assert outs == [(2, 1023), (3, 2046), (4, 3069), (5, 4092), (6, 5000)]
    assert w.stats.prefill_batches == 6 and w.stats.decode_steps == 5 and w.stats.decode_tokens == 5
    assert a.progress[-1][1] == 6


def test_a_mixed_prefill_costs_the_prefill_and_the_decode_step_less_its_fixed_cost() -> None:
    w = _worker("fcfs", max_prefill_tokens=16384, enable_mixed_chunk=True)
    a = SimRequest("a", "x", tuple(range(100)), 50, 0.0)
    w.enqueue(a)
    w.start_iteration(0.0)
    w.complete()
    b = SimRequest("b", "y", tuple(range(1000, 1500)), 4, w.now)
    w.enqueue(b)
    start = w.now
    end = w.start_iteration(start)
    cost = w.cost
    expected = cost.prefill_ms([(500, 0)]) + cost.decode_ms(1, 100) - cost.profile.decode.a
    assert w.pending.decoded == [a] and w.pending.prefilled == [b]
    assert end - start == pytest.approx(expected / 1000.0)
    w.complete()
    assert w.stats.decode_token_ms == pytest.approx(expected)
