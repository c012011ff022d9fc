"""A flooding client and a light client against a live server (test support).

The heavy client keeps ``heavy_concurrency`` requests in flight, all sharing a
long prefix (so LPM always ranks them first); the light client sends one
request at a time with a prefix of its own. Bounded in time: after
``duration_s`` nothing new is sent, and what is still in flight is abandoned
after ``grace_s`` (its wait so far counts as its latency).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

import aiohttp


@dataclass
class FloodResult:
    light_latencies: list[float] = field(default_factory=list)
    heavy_done: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def cache_hit_rate(self) -> float:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    @property
    def light_worst(self) -> float:
        return max(self.light_latencies, default=float("inf"))


async def _send(session, url, client, ids, max_new, result: FloodResult) -> None:
    body = {"input_ids": ids, "sampling_params": {"max_new_tokens": max_new, "ignore_eos": True}}
    async with session.post(url, json=body, headers={"X-Client-Id": client}) as resp:
        if resp.status != 200:
            result.errors.append(f"{client}: HTTP {resp.status} {await resp.text()}")
            return
        meta = (await resp.json())["meta_info"]
        result.prompt_tokens += meta["prompt_tokens"]
        result.cached_tokens += meta.get("cached_tokens", 0)


async def _flood(base_url: str, duration_s: float, grace_s: float, heavy_concurrency: int,
                 heavy_prefix: int, light_prefix: int, max_new: int) -> FloodResult:
    result = FloodResult()
    url = base_url + "/generate"
    stop_at = time.monotonic() + duration_s
    shared = [7 + (i % 500) for i in range(heavy_prefix)]
    timeout = aiohttp.ClientTimeout(total=duration_s + grace_s)

    async with aiohttp.ClientSession(timeout=timeout) as session:
        async def heavy(worker: int) -> None:
            n = 0
            while time.monotonic() < stop_at:
                n += 1
                await _send(session, url, "heavy", shared + [600 + worker, 600 + n % 300], max_new, result)
                result.heavy_done += 1

        async def light() -> None:
            n = 0
            while time.monotonic() < stop_at:
                n += 1
                ids = [(31 * n + i) % 1000 + 1 for i in range(light_prefix)]
                sent = time.monotonic()
                task = asyncio.ensure_future(_send(session, url, "light", ids, max_new, result))
                try:
                    await asyncio.wait_for(asyncio.shield(task), timeout=max(0.1, stop_at + grace_s - sent))
                except asyncio.TimeoutError:
                    result.light_latencies.append(time.monotonic() - sent)  # censored: still waiting
                    task.cancel()
                    return
                result.light_latencies.append(time.monotonic() - sent)

        workers = [asyncio.ensure_future(heavy(i)) for i in range(heavy_concurrency)]
        await asyncio.sleep(1.0)  # let the flood build a queue first
        await light()
        done, pending = await asyncio.wait(workers, timeout=max(0.1, stop_at + grace_s - time.monotonic()))
        for task in pending:
            task.cancel()
    return result


def run_flood(base_url: str, duration_s: float = 20.0, grace_s: float = 15.0, heavy_concurrency: int = 24,
              heavy_prefix: int = 480, light_prefix: int = 160, max_new: int = 24) -> FloodResult:
    return asyncio.run(_flood(base_url, duration_s, grace_s, heavy_concurrency, heavy_prefix, light_prefix, max_new))
