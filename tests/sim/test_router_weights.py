"""``--fair-client-weights`` through the cluster-wide DLPM router (``d2lpm_global``) in the simulator:
a client of weight 2 gets twice the service of a client of weight 1 while both are backlogged."""

from __future__ import annotations

import pytest

from sglang_fair.sim.backend import SimBackend
from sglang_fair.workloads.model import Call, Program, Workload

BURST = 400  # requests each, all at t=0: both clients stay backlogged well past the measured window


def _burst(client: str) -> list[Program]:
    base = sum(map(ord, client)) * 1000  # no prefix shared between the clients
    return [Program(f"{client}/{k}", client, 0.0, (Call(tuple(base + (k * 7 + j) % 997 for j in range(256)), 128),))
            for k in range(BURST)]


def _service_by(records, t_end: float) -> dict[str, float]:
    out = {"alice": 0.0, "bob": 0.0}
    for r in records:
        if r.ok and r.t_done <= t_end:
            out[r.client] += r.prompt_tokens + 2 * r.output_tokens
    return out


@pytest.mark.parametrize("weights, ratio", [({"alice": 2.0}, 2.0), ({}, 1.0)])
def test_a_weighted_client_gets_its_weighted_share_through_the_router(weights, ratio):
    backend = SimBackend(policy="dlpm", num_workers=2, router="d2lpm_global", kv_pool_tokens=20_000,
                         client_weights=weights)
    result = backend.run(Workload("weights", _burst("alice") + _burst("bob")), progress=False)
    assert not result.partial
    first_done = min(max(r.t_done for r in result.records if r.client == c) for c in ("alice", "bob"))
    service = _service_by(result.records, 0.5 * first_done)  # both backlogged throughout
    assert service["alice"] / service["bob"] == pytest.approx(ratio, rel=0.15)
