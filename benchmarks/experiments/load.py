"""Many clients at once beside a flood: every request answered once, nothing left behind.

One ``--policy dlpm --dp N`` server (the cluster-wide DLPM router holds what
the workers' local queues cannot take), a flooding client sending ``--flood``
requests at once, and ``--requests`` more from ``--clients`` clients, all in
flight together (``--connections`` at a time from the client): a share of them streams (``--stream-share``) and a share
hangs up after the first streamed chunk (``--hangup-share``). Printed:

* answers by kind: complete (plain or streamed), hung up by the client,
  errors by HTTP status, timeouts, connection failures;
* the most requests the router held at once (its ``/metrics`` gauge, polled);
* the data-parallel controller's CPU time per request (the router runs
  there), and every role's, from the server's processes;
* whether the gauges of queued, running and held requests are back to 0
  within ``--settle`` seconds, and the server healthy after.

Exit 0 when every request the client did not hang up on was answered 200
exactly once, the gauges came back to 0 and the server is healthy; else 1.

    PYTHONPATH=. python benchmarks/experiments/load.py                       # 1,000 requests, 100 clients, --dp 2
    PYTHONPATH=. python benchmarks/experiments/load.py --requests 5000 --flood 500
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import random
import re
import sys
import time
from dataclasses import dataclass, field

import aiohttp

from sglang_fair.bench.process_cpu import by_role, snapshot
from sglang_fair.testing.server import LocalServer

FLOODER = "flood"
VOCAB = 1024  # the tiny CPU model's
_GAUGES = ("sglang_fair_client_queued_requests", "sglang_fair_client_running_requests",
           "sglang_fair_router_held_requests")


@dataclass
class Tally:
    kinds: collections.Counter = field(default_factory=collections.Counter)
    answers: collections.Counter = field(default_factory=collections.Counter)  # rid -> 200 answers
    held_max: float = 0.0
    poll_failures: int = 0


def _body(rng: random.Random, rid: str, prompt: int, max_new: int, stream: bool) -> dict:
    return {"rid": rid, "input_ids": [rng.randrange(3, VOCAB) for _ in range(prompt)], "stream": stream,
            "sampling_params": {"max_new_tokens": max_new, "temperature": 0.0, "ignore_eos": True}}


async def one(session: aiohttp.ClientSession, url: str, client: str, body: dict, hang_up: bool, tally: Tally,
              timeout: float) -> None:
    kind = "hangup" if hang_up else "stream" if body["stream"] else "plain"
    try:
        async with asyncio.timeout(timeout):
            async with session.post(url + "/generate", json=body, headers={"X-Client-Id": client}) as resp:
                if resp.status != 200:
                    await resp.read()
                    tally.kinds[f"{kind}: HTTP {resp.status}"] += 1
                    return
                if hang_up:
                    await resp.content.readany()  # the first chunk, then the client goes away
                    resp.close()
                    tally.kinds["hung up by the client"] += 1
                    return
                if body["stream"]:
                    async for _line in resp.content:
                        pass
                else:
                    json.loads(await resp.read())
                tally.answers[body["rid"]] += 1
                tally.kinds[f"{kind}: complete"] += 1
    except TimeoutError:
        tally.kinds[f"{kind}: timed out after {timeout:.0f} s"] += 1
    except aiohttp.ClientError as error:
        tally.kinds[f"{kind}: connection failed ({type(error).__name__})"] += 1


async def gauges(session: aiohttp.ClientSession, url: str) -> dict[str, float]:
    async with session.get(url + "/metrics") as resp:
        text = await resp.text()
    out = dict.fromkeys(_GAUGES, 0.0)
    for line in text.splitlines():
        match = re.match(r"(sglang_fair_\w+)(\{[^}]*\})? ([0-9.eE+-]+)$", line)
        if match and match.group(1) in out:
            out[match.group(1)] += float(match.group(3))
    return out


async def watch_held(session: aiohttp.ClientSession, url: str, tally: Tally, stop: asyncio.Event) -> None:
    while not stop.is_set():
        try:
            with_held = await gauges(session, url)
        except aiohttp.ClientError:  # a busy server may drop a poll; the requests are what is judged
            tally.poll_failures += 1
        else:
            tally.held_max = max(tally.held_max, with_held["sglang_fair_router_held_requests"])
        await asyncio.sleep(0.1)


async def drive(url: str, args: argparse.Namespace) -> tuple[Tally, dict[str, float], bool, float]:
    rng = random.Random(args.seed)
    tally = Tally()
    connector = aiohttp.TCPConnector(limit=args.connections)
    async with aiohttp.ClientSession(connector=connector) as session:
        stop = asyncio.Event()
        watcher = asyncio.create_task(watch_held(session, url, tally, stop))
        jobs = [one(session, url, FLOODER, _body(rng, f"f{i}", args.prompt, args.max_new, False), False, tally,
                    args.timeout) for i in range(args.flood)]
        for i in range(args.requests):
            roll = rng.random()
            hang_up = roll < args.hangup_share
            stream = hang_up or roll < args.hangup_share + args.stream_share
            jobs.append(one(session, url, f"c{i % args.clients}", _body(rng, f"r{i}", args.prompt, args.max_new,
                                                                         stream), hang_up, tally, args.timeout))
        rng.shuffle(jobs)
        started = time.monotonic()
        await asyncio.gather(*jobs)
        elapsed = time.monotonic() - started
        stop.set()
        await watcher
        deadline = time.monotonic() + args.settle
        left = await gauges(session, url)
        while any(left.values()) and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
            left = await gauges(session, url)
        async with session.get(url + "/health") as resp:
            healthy = resp.status == 200
    return tally, left, healthy, elapsed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=1000, help="requests from the ordinary clients")
    ap.add_argument("--clients", type=int, default=100)
    ap.add_argument("--flood", type=int, default=200, help="requests the flooding client sends at once")
    ap.add_argument("--dp", type=int, default=2, help="workers (--dp)")
    ap.add_argument("--connections", type=int, default=1024,
                    help="the client's connections at once (more requests wait in the client): past the server's "
                         "listen backlog, the kernel refuses connections before the server sees them")
    ap.add_argument("--prompt", type=int, default=64, help="prompt tokens per request")
    ap.add_argument("--max-new", type=int, default=16, help="output tokens per request")
    ap.add_argument("--stream-share", type=float, default=0.1)
    ap.add_argument("--hangup-share", type=float, default=0.05)
    ap.add_argument("--timeout", type=float, default=900.0, help="per-request client timeout (s)")
    ap.add_argument("--settle", type=float, default=30.0, help="seconds for the gauges to come back to 0")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if min(args.requests, args.clients, args.dp, args.connections) < 1 or args.flood < 0:
        ap.error("--requests, --clients, --dp and --connections must be >= 1, --flood >= 0")
    if not 0 <= args.stream_share + args.hangup_share <= 1:
        ap.error("--stream-share + --hangup-share must be within [0, 1]")
    server = LocalServer(module="sglang_fair.launch_server", max_total_tokens=16384,
                         extra_args=["--policy", "dlpm", "--dp", str(args.dp), "--enable-metrics",
                                     "--max-running-requests", "16"])
    with server:
        before = snapshot(server.pid)
        tally, left, healthy, elapsed = asyncio.run(drive(server.base_url, args))
        cpu = by_role(before, snapshot(server.pid))
    sent = args.requests + args.flood
    hung_up = tally.kinds["hung up by the client"]
    answered_once = sum(1 for n in tally.answers.values() if n == 1)
    print(f"{sent} requests ({args.flood} from the flood, {args.requests} from {args.clients} clients), "
          f"--dp {args.dp}, all in flight together; done in {elapsed:.1f} s")
    for kind, count in sorted(tally.kinds.items()):
        print(f"  {kind:<40} {count:>6}")
    print(f"router held at most {tally.held_max:.0f} requests at once (polled every 0.1 s, "
          f"{tally.poll_failures} polls failed)")
    print(f"controller CPU: {cpu['controller'] * 1e6 / sent:.0f} us per request "
          f"({cpu['controller']:.2f} s in all); " + ", ".join(f"{r} {s:.1f} s" for r, s in cpu.items()))
    print(f"gauges after {args.settle:.0f} s: " + ", ".join(f"{k.removeprefix('sglang_fair_')} {v:g}"
                                                          for k, v in left.items()) + f"; healthy: {healthy}")
    ok = answered_once == sent - hung_up and not any(left.values()) and healthy
    print(f"every request answered once (hang-ups aside), gauges at 0, healthy: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
