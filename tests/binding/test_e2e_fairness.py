"""End to end: the real SGLang server on CPU, one flooding client and one light client.

The heavy client keeps many requests in flight that share a long prefix, so
LPM always ranks them first; the light client sends one request at a time.
Under lpm the light client waits as long as the flood lasts; under dlpm and
vtc it is served throughout. Comparisons are made within one test run, so a
slow or busy machine shifts all policies alike.
"""

from __future__ import annotations

import pytest

from sglang_fair.testing.server import LocalServer, side_by_side
from tests.binding.flood import FloodResult, run_flood

pytestmark = pytest.mark.server

DURATION_S = 12.0


POLICIES = ("lpm", "dlpm", "vtc")


def _server(policy: str) -> LocalServer:
    args = ["--policy", policy, "--fair-quantum", "256", "--max-running-requests", "4"]
    return LocalServer(module="sglang_fair.launch_server", extra_args=args, max_total_tokens=4096,
                       skip_tokenizer_init=True)


@pytest.fixture(scope="module")
def outcomes() -> dict[str, FloodResult]:
    # Started side by side (about one start's time for the three); each flood then runs while the
    # servers not yet measured sit idle, and each server stops once its flood is over.
    with side_by_side([_server(policy) for policy in POLICIES]) as servers:
        results = {}
        for policy, server in zip(POLICIES, servers):
            results[policy] = run_flood(server.base_url, duration_s=DURATION_S, grace_s=15.0, heavy_concurrency=16,
                                        heavy_prefix=256, light_prefix=96, max_new=16)
            server.stop()
        return results


def test_no_request_errors(outcomes):
    for policy, result in outcomes.items():
        assert result.errors == [], policy


def test_lpm_starves_the_light_client(outcomes):
    lpm = outcomes["lpm"]
    # One light request, still waiting (or barely done) when the flood ended.
    assert len(lpm.light_latencies) <= 1
    assert lpm.light_worst >= DURATION_S * 0.8


@pytest.mark.parametrize("policy", ["dlpm", "vtc"])
def test_fair_policies_keep_serving_the_light_client(outcomes, policy):
    lpm, fair = outcomes["lpm"], outcomes[policy]
    assert len(fair.light_latencies) >= len(lpm.light_latencies) + 2
    assert fair.light_worst < 0.6 * lpm.light_worst
    assert fair.heavy_done > 0  # the flood is still served too


def test_dlpm_keeps_most_of_lpms_cache_hits(outcomes):
    assert outcomes["dlpm"].cache_hit_rate >= outcomes["lpm"].cache_hit_rate - 0.15
    # and more than VTC, which ignores locality
    assert outcomes["dlpm"].cache_hit_rate >= outcomes["vtc"].cache_hit_rate
