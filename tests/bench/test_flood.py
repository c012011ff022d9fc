"""sglang_fair/bench/flood.py without a server: the client's own event-loop lag probe."""

import asyncio
from types import SimpleNamespace

import pytest

from sglang_fair.bench import flood
from sglang_fair.bench.flood import Rep, _loop_lag
from tests.support.clock import FakeClock


def test_the_lag_probe_sees_the_client_blocked_and_stops_when_told(monkeypatch):
    clock = FakeClock(100.0)
    monkeypatch.setattr(flood, "time", SimpleNamespace(perf_counter=clock))

    async def scenario() -> Rep:
        rep, stop = Rep(), asyncio.Event()
        probe = asyncio.create_task(_loop_lag(rep, stop, every_s=0.01))
        await asyncio.sleep(0.05)  # several wake-ups, each on time by the probe's clock
        quiet = rep.client_lag_max_s
        clock.advance(0.3)  # the client busy elsewhere: the probe's next wake-up is late by 0.3 s less its period
        await asyncio.sleep(0.05)
        stop.set()
        await asyncio.wait_for(probe, 1.0)
        assert quiet == 0.0
        return rep

    assert asyncio.run(scenario()).client_lag_max_s == pytest.approx(0.29)
