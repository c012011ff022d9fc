"""sglang_fair/bench/flood.py without a server: the client's own event-loop lag probe."""

import asyncio
import time

from sglang_fair.bench.flood import Rep, _loop_lag


def test_the_lag_probe_sees_the_client_blocked_and_stops_when_told():
    async def scenario() -> Rep:
        rep, stop = Rep(), asyncio.Event()
        probe = asyncio.create_task(_loop_lag(rep, stop, every_s=0.01))
        await asyncio.sleep(0.05)
        quiet = rep.client_lag_max_s
        time.sleep(0.3)  # the client busy elsewhere: the probe's next wake-up is late by about this much
        await asyncio.sleep(0.05)
        stop.set()
        await asyncio.wait_for(probe, 1.0)
        assert quiet < 0.25
        return rep

    assert asyncio.run(scenario()).client_lag_max_s >= 0.25
