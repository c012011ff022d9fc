"""End to end: latency isolation (``--fair-isolation``) on the real SGLang server on CPU.

A flood fills every running slot, then a light client sends short requests one
at a time. Isolation must preempt flood requests through SGLang's own
preemption path, answer every request exactly once with all its tokens, and
charge each token once (the per-client metrics against what the replies say),
with SGLang's default scheduler and with mixed chunks (``--enable-mixed-chunk``).
"""

from __future__ import annotations

import asyncio
import aiohttp
import pytest

from sglang_fair.testing.server import LocalServer, side_by_side
from tests.support.http import client_metric, metrics_text, wait_until

pytestmark = pytest.mark.server

FLOOD, FLOOD_NEW, LIGHT, LIGHT_NEW = 24, 48, 5, 8


async def _generate(session, url: str, client: str, ids: list[int], max_new: int) -> dict:
    body = {"input_ids": ids, "sampling_params": {"max_new_tokens": max_new, "ignore_eos": True}}
    async with session.post(url + "/generate", json=body, headers={"X-Client-Id": client}) as resp:
        assert resp.status == 200, await resp.text()
        return await resp.json()


async def _traffic(url: str) -> tuple[list[dict], list[dict]]:
    prefix = [7 + i % 500 for i in range(256)]
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=300)) as session:
        flood = [asyncio.ensure_future(_generate(session, url, "flooder", prefix + [600 + i], FLOOD_NEW))
                 for i in range(FLOOD)]
        await asyncio.sleep(1.0)  # the flood holds every slot
        light = []
        for n in range(LIGHT):
            light.append(await _generate(session, url, "light", [(31 * n + i) % 900 + 1 for i in range(24)], LIGHT_NEW))
        return await asyncio.gather(*flood), light


def _metric(text: str, name: str, client: str) -> float:
    found = client_metric(text, name, client)
    assert found is not None, f"{name} for {client} not on /metrics"
    return found


def _settled_metrics(server: LocalServer, flood: list[dict], light: list[dict]) -> str:
    """/metrics once its per-client counters (refreshed once a second) have caught up with every reply."""
    def caught_up(text: str) -> bool:
        return all((client_metric(text, "client_output_tokens_total", client) or 0)
                   >= sum(r["meta_info"]["completion_tokens"] for r in replies)
                   for client, replies in (("flooder", flood), ("light", light)))
    return wait_until(lambda: metrics_text(server, timeout=30), caught_up, timeout_s=30, interval_s=0.5,
                      what="per-client output counters covering every reply")


# Also with SGLang's mixed chunks, which decode the running batch inside prefills that
# here come in 128-token chunks: preemption and charging must hold there too.
VARIANTS = {"plain": [], "mixed-chunks": ["--enable-mixed-chunk", "--chunked-prefill-size", "128"]}


@pytest.fixture(scope="module")
def runs() -> dict[str, tuple[list[dict], list[dict], str]]:
    """Each variant's replies and settled /metrics; the two servers start side by side (about one
    start's time), then each serves its traffic in turn while the other sits idle."""
    servers = {name: LocalServer(module="sglang_fair.launch_server", max_total_tokens=4096, skip_tokenizer_init=True,
                                 extra_args=["--policy", "dlpm", "--fair-isolation", "--fair-quantum", "256",
                                             "--max-running-requests", "4", "--enable-metrics", *flags])
               for name, flags in VARIANTS.items()}
    with side_by_side(servers.values()):
        out = {}
        for name, server in servers.items():
            flood, light = asyncio.run(_traffic(server.base_url))
            out[name] = flood, light, _settled_metrics(server, flood, light)
            server.stop()
        return out


@pytest.fixture(params=list(VARIANTS))
def isolated_run(request, runs):
    return runs[request.param]


def test_every_request_is_answered_once_with_all_its_tokens(isolated_run):
    flood, light, _ = isolated_run
    assert len(flood) == FLOOD and len(light) == LIGHT
    assert all(r["meta_info"]["completion_tokens"] == FLOOD_NEW for r in flood)
    assert all(r["meta_info"]["completion_tokens"] == LIGHT_NEW for r in light)


def test_flood_requests_were_preempted_for_the_light_client(isolated_run):
    flood, _, metrics = isolated_run
    preempted = [r for r in flood if r["meta_info"].get("num_retractions", 0) > 0]
    assert preempted, "no flood request was preempted"
    assert _metric(metrics, "client_preempted_requests_total", "flooder") >= 1
    assert _metric(metrics, "client_recomputed_tokens_total", "flooder") > 0
    assert _metric(metrics, "client_preempted_requests_total", "light") == 0


def test_tokens_are_charged_once_despite_preemption(isolated_run):
    flood, light, metrics = isolated_run
    for client, replies in (("flooder", flood), ("light", light)):
        outputs = sum(r["meta_info"]["completion_tokens"] for r in replies)
        assert _metric(metrics, "client_output_tokens_total", client) == outputs
        prompts = sum(r["meta_info"]["prompt_tokens"] for r in replies)
        assert _metric(metrics, "client_input_tokens_total", client) == prompts
