"""sglang_fair/bench/paper_grid.py: paper-scale workloads, the H100 KV pool, backlog shares."""

import pytest

from sglang_fair.bench import paper_grid as pg
from sglang_fair.runs.records import RequestRecord
from sglang_fair.workloads.model import Call, Program, Workload


def test_kv_pool_follows_sglang_memory_heuristic():
    # 512 + 1.5 x 8192 + 128 + 2 x 256 + 8 x 58 MiB reserved on an 81,559 MiB H100
    assert pg.sglang_reserved_mib() == 13_904
    assert pg.mem_fraction_static() == 0.83
    pool = pg.h100_kv_pool_tokens()
    assert pool == int((0.83 * 81_559 * 2**20 - 8_030_261_248 * 2) // 131_072)
    assert 400_000 < pool < 440_000  # the profile's estimate is 420k
    assert pg.LLAMA_8B_KV_BYTES_PER_TOKEN == 131_072


def test_reserve_has_sglang_floor_of_10_gib():
    old = pg.SGLANG_CHUNKED_PREFILL
    try:
        pg.SGLANG_CHUNKED_PREFILL = 0
        assert pg.sglang_reserved_mib() == 10 * 1024
    finally:
        pg.SGLANG_CHUNKED_PREFILL = old


def test_prompt_lengths_extend_the_first_parent():
    calls = (Call(tokens=(1,) * 10, max_new_tokens=5),
             Call(tokens=(2,) * 3, max_new_tokens=4, parents=(0,), extends_parent=True),
             Call(tokens=(3,) * 2, max_new_tokens=1, parents=(1,), extends_parent=True),
             Call(tokens=(4,) * 7, max_new_tokens=2, parents=(0,)))  # depends, does not extend
    assert pg.prompt_lengths(calls) == [10, 18, 24, 7]
    wl = Workload("w", [Program("p", "c", 0.0, calls), Program("q", "c", 4.0, calls[:1])])
    assert pg.offered_service(wl) == (10 + 18 + 24 + 7) + 2 * (5 + 4 + 1 + 2) + (10 + 2 * 5)
    assert pg.arrival_span(wl) == 4.0


def test_rate_grows_with_workers_and_keeps_client_ratios():
    one = pg.paper_workload("qa", "s1", 1, seed=0, duration=20)
    four = pg.paper_workload("qa", "s1", 4, seed=0, duration=20)
    count = lambda wl, c: sum(p.client == c for p in wl.programs)  # noqa: E731
    rates = pg.client_rates("qa", "s1")
    for c, rate in rates.items():
        assert count(one, c) == max(1, round(rate * 20))
        assert count(four, c) == max(1, round(4 * rate * 20))
    assert rates["bad"] == pytest.approx(4 * rates["good-0"])  # Table 3 S1: the misbehaving client's 4x rate
    doc = max(len(c.tokens) for p in one.programs for c in p.calls)
    assert doc > 20_000  # paper-scale documents


def _rec(client, sent, admitted):
    return RequestRecord(rid=f"{client}{sent}", client=client, program_id=f"{client}{sent}", call_index=0,
                         well_behaved=True, t_sent=sent, t_first_token=admitted + 1, t_done=admitted + 2,
                         prompt_tokens=10, cached_tokens=0, output_tokens=1, t_admitted=admitted)


def test_waiting_share_is_the_mean_backlogged_fraction():
    records = [_rec("a", 0.0, 5.0), _rec("b", 2.0, 4.0), _rec("b", 6.0, 8.0)]
    assert pg.waiting_share(records, (0.0, 10.0), ["a", "b"]) == pytest.approx((0.5 + 0.4) / 2)
    assert pg.waiting_share(records, None, ["a"]) is None
