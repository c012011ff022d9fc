"""DLPM servers behind SGLang's gateway: do the tenants reach the workers, and does one tenant's errors lock out the others?

Two workers (``--policy dlpm --enable-metrics``, one core each) behind the
gateway (``--gateway``: ``smg`` 1.13 by default, or ``sglang-router`` 0.3.2;
``cache_aware``), once with the gateway's defaults and once per
``--variant`` (gateway flags), the same two workers behind each (a later
setting finds their caches warm and their clients' counters where the last
left them; what a setting's tenants were charged is read as a difference):

* **identity**: tenant ``alice`` sends requests naming herself in the
  ``X-Client-Id`` header, ``bob`` in the body's ``routing_key``, ``carol`` in
  SGLang's ``x-smg-routing-key`` header; the service
  each worker charged to each tenant is read from the workers' own
  ``/metrics`` (``sglang_fair_client_service_total``). What the gateway does
  not pass on is charged to ``default``. The other tenants use the header.
* **one tenant's errors**: a light tenant sends a short request every
  ``--period`` seconds for ``--window`` seconds; after a few seconds a bad
  tenant sends ``--bad`` over-long prompts (each refused by the server with
  HTTP 400). Printed: how many of the light tenant's requests failed, with
  which statuses, and for how long.

With ``--forwarding`` it instead puts a stand-in worker (an HTTP server
that records what reaches it) behind the gateway and prints which identity
headers and body fields the gateway passed on, per endpoint.

With ``--throttled`` two stand-in workers answer one tenant 429 with
``Retry-After`` (what FairServe's overload throttle answers a tenant above its
share) and serve the others; per gateway setting (its defaults, then each
``--variant``) it prints what the throttled tenant received, how many times
each of its requests reached a worker (the gateway's retries), and whether a
light tenant that came after was still served.

    PYTHONPATH=. python benchmarks/experiments/behind_gateway.py [--gateway smg] [--bad 40] [--window 30] \\
        [--variant="--disable-circuit-breaker"]
    PYTHONPATH=. python benchmarks/experiments/behind_gateway.py --forwarding
    PYTHONPATH=. python benchmarks/experiments/behind_gateway.py --throttled [--variant="--disable-retries"]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import random
import re
import string
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import aiohttp

from sglang_fair.bench.gateway import GATEWAYS, Gateway, core_slices, gateway_missing, start_workers
from sglang_fair.testing.server import LocalServer

SERVER = ["--policy", "dlpm", "--enable-metrics"]
GATEWAY = ["--policy", "cache_aware"]
DEFAULT_VARIANTS = ["--disable-circuit-breaker"]
OVER_LONG = 4096  # characters, one token each: twice the bundled model's context
METRICS_REFRESH_S = 1.0  # workers refresh their per-client series at most this often
SERVICE = re.compile(r'^sglang_fair_client_service_total\{[^}]*client="([^"]+)"[^}]*\} ([0-9.e+]+)$', re.M)


async def _post(session: aiohttp.ClientSession, url: str, client: str, text: str, out: int) -> int:
    body = {"text": text, "sampling_params": {"max_new_tokens": out, "ignore_eos": True}}
    headers = {"X-Client-Id": client}
    if client == "bob":
        body["routing_key"], headers = client, {}
    elif client == "carol":
        headers = {"x-smg-routing-key": client}
    try:
        async with session.post(url + "/generate", json=body, headers=headers) as reply:
            await reply.read()
            return reply.status
    except aiohttp.ClientError:
        return -1  # no HTTP answer at all


def service_by_worker(servers: Sequence[LocalServer]) -> list[Counter[str]]:
    """Per worker: client -> service charged so far, from the worker's /metrics."""
    out = []
    for server in servers:
        with urllib.request.urlopen(server.base_url + "/metrics", timeout=30) as reply:
            text = reply.read().decode()
        charged: Counter[str] = Counter()
        for client, value in SERVICE.findall(text):
            charged[client] += float(value)
        out.append(charged)
    return out


def gained(before: Counter[str], after: Counter[str]) -> dict[str, float]:
    """Per client, the service charged between two readings; a counter that went down (a client
    dropped as idle and counted again from 0) is an error, not a negative charge."""
    fell = [client for client in before if after.get(client, 0.0) < before[client]]
    if fell:
        raise SystemExit(f"service counters went down between two readings for {fell}")
    return {client: value - before.get(client, 0.0) for client, value in after.items()
            if value > before.get(client, 0.0)}


async def identity(url: str, requests: int) -> None:
    """alice names herself in the ``X-Client-Id`` header, bob in the body's ``routing_key``, carol in
    the ``x-smg-routing-key`` header."""
    async with aiohttp.ClientSession() as session:
        statuses = await asyncio.gather(*(_post(session, url, client, f"{client} asks question {i} " * 4, 8)
                                          for i in range(requests) for client in ("alice", "bob", "carol")))
    if set(statuses) != {200}:
        raise SystemExit(f"identity: statuses {Counter(statuses)}")


async def bad_tenant(url: str, bad: int, window_s: float, period_s: float, bad_after_s: float) -> dict:
    light: list[tuple[float, int]] = []
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as session:
        start = time.perf_counter()

        async def light_tenant() -> None:
            i = 0
            while (t := time.perf_counter() - start) < window_s:
                light.append((t, await _post(session, url, "light", f"a short question number {i}", 8)))
                i += 1
                await asyncio.sleep(max(0.0, period_s - (time.perf_counter() - start - t)))

        async def flood_of_errors() -> Counter:
            await asyncio.sleep(bad_after_s)
            # Distinct prompts, so a cache-aware gateway spreads them over the workers.
            prompts = ["".join(random.Random(i).choices(string.ascii_lowercase, k=OVER_LONG)) for i in range(bad)]
            return Counter(await asyncio.gather(*(_post(session, url, "bad", p, 8) for p in prompts)))

        bad_statuses, _ = await asyncio.gather(flood_of_errors(), light_tenant())
    failed = [(t, s) for t, s in light if s != 200]
    return {"light": len(light), "failed": len(failed), "statuses": dict(Counter(s for _, s in failed)),
            "bad": dict(bad_statuses),
            "failing_from_s": failed[0][0] if failed else None, "failing_until_s": failed[-1][0] if failed else None}


# What a caller may name itself with, and where; the stand-in worker reports which of them arrive.
MODEL = "m"  # the model the stand-in workers say they serve (the probes name it)
PROBES = {
    "/generate": ({"text": "hello", "routing_key": "body-key"},
                  {"X-Client-Id": "header-client", "X-App-Id": "app", "x-smg-routing-key": "smg-key",
                   "Authorization": "Bearer sk-probe-0123456789", "X-Api-Key": "sk-probe-0123456789"}),
    "/v1/completions": ({"model": MODEL, "prompt": "hello", "user": "body-user"},
                        {"X-Client-Id": "header-client", "x-smg-routing-key": "smg-key",
                         "Authorization": "Bearer sk-probe-0123456789", "X-Api-Key": "sk-probe-0123456789"}),
    "/v1/chat/completions": ({"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "user": "body-user"},
                             {"X-Client-Id": "header-client", "x-smg-routing-key": "smg-key",
                              "Authorization": "Bearer sk-probe-0123456789", "X-Api-Key": "sk-probe-0123456789"}),
}


@contextlib.asynccontextmanager
async def stand_in_workers(count: int, handler):
    """``count`` HTTP servers on free ports answering every request with ``handler(request)``: workers
    the gateway can route to that record what reaches them, with no model behind them."""
    from aiohttp import web

    from sglang_fair.testing.server import pick_free_port

    # The gateway first probes a worker over HTTP/2, which aiohttp logs at length as a bad request.
    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)
    runners, urls = [], []
    try:
        for _ in range(count):
            port = pick_free_port()
            app = web.Application()
            app.router.add_route("*", "/{tail:.*}", handler)
            runner = web.AppRunner(app)
            await runner.setup()
            runners.append(runner)
            await web.TCPSite(runner, "127.0.0.1", port).start()
            urls.append(f"http://127.0.0.1:{port}")
        yield urls
    finally:
        for runner in runners:
            await runner.cleanup()


def _answer(request=None):
    """A stand-in worker's answer: a generation, or what a gateway asks a worker about itself (smg
    routes an OpenAI request only to a worker that serves its model)."""
    from aiohttp import web

    if request is not None and request.method == "GET":
        if request.path.endswith("/models"):
            return web.json_response({"object": "list", "data": [{"id": MODEL, "object": "model"}]})
        return web.json_response({"model_path": MODEL, "served_model_name": MODEL, "tokenizer_path": MODEL,
                                  "max_running_requests": 16, "is_generation": True})
    return web.json_response({"text": "x", "meta_info": {"prompt_tokens": 1, "completion_tokens": 1}})


async def forwarding(log_dir: Path, kind: str) -> dict[str, dict[str, bool]]:
    """Route -> each identity field sent -> whether it reached a stand-in worker behind the gateway."""
    received: dict[str, tuple[dict, dict]] = {}

    async def worker(request):
        if request.method == "POST":
            received[request.path] = ({k.lower(): v for k, v in request.headers.items()}, await request.json())
        return _answer(request)

    async with stand_in_workers(1, worker) as urls:
        gateway = Gateway.around(urls, GATEWAY, log_dir, kind=kind)
        try:
            await asyncio.to_thread(gateway.__enter__)
            async with aiohttp.ClientSession() as session:
                for path, (body, headers) in PROBES.items():
                    async with session.post(gateway.base_url + path, json=body, headers=headers) as reply:
                        await reply.read()
        finally:
            await asyncio.to_thread(gateway.__exit__, None, None, None)
    out = {}
    for path, (body, headers) in PROBES.items():
        got_headers, got_body = received.get(path, ({}, {}))
        out[path] = {**{f"header {h}": h.lower() in got_headers for h in headers},
                     **{f"body {k}": k in got_body for k in ("routing_key", "user") if k in body}}
    return out


THROTTLED = "flooder"  # the tenant the stand-in workers answer 429, as FairServe's overload throttle would
RETRY_AFTER_S = 2


async def throttled(variant: Sequence[str], log_dir: Path, requests: int, light: int, kind: str) -> dict:
    """Behind the gateway (``variant`` flags), two stand-in workers answer every request of one tenant 429
    with ``Retry-After`` and serve the others. The throttled tenant sends ``requests`` requests at once,
    then a light tenant ``light`` one after another. Returns what each saw and how often each request
    reached a worker (a gateway that retries a 429 sends it again, at once, despite ``Retry-After``)."""
    from aiohttp import web

    arrivals: Counter[str] = Counter()  # prompt -> times it reached a worker

    async def worker(request):
        if request.method != "POST":
            return _answer(request)
        body = await request.json()
        arrivals[body.get("text", "")] += 1
        if request.headers.get("x-smg-routing-key") == THROTTLED:
            return web.json_response({"error": {"message": "throttled: above its fair share", "code": 429}},
                                     status=429, headers={"Retry-After": str(RETRY_AFTER_S)})
        return _answer(request)

    async with stand_in_workers(2, worker) as urls:
        gateway = Gateway.around(urls, [*GATEWAY, *variant], log_dir, kind=kind)
        try:
            await asyncio.to_thread(gateway.__enter__)
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as session:
                async def post(client: str, text: str) -> tuple[int, str | None, float]:
                    start = time.perf_counter()
                    body = {"text": text, "sampling_params": {"max_new_tokens": 8}}
                    try:
                        async with session.post(gateway.base_url + "/generate", json=body,
                                                headers={"x-smg-routing-key": client}) as reply:
                            await reply.read()
                            return reply.status, reply.headers.get("Retry-After"), time.perf_counter() - start
                    except aiohttp.ClientError:
                        return -1, None, time.perf_counter() - start

                flood = await asyncio.gather(*(post(THROTTLED, f"flood request {i}") for i in range(requests)))
                after = [await post("light", f"light request {i}") for i in range(light)]
        finally:
            await asyncio.to_thread(gateway.__exit__, None, None, None)
    attempts = [arrivals[f"flood request {i}"] for i in range(requests)]
    return {"throttled": dict(Counter(status for status, _, _ in flood)),
            "retry_after_passed": sum(1 for _, header, _ in flood if header is not None),
            "attempts": {"min": min(attempts), "max": max(attempts), "total": sum(attempts)},
            "throttled_latency_max_s": max(t for _, _, t in flood),
            "light": dict(Counter(status for status, _, _ in after)),
            "light_reached_workers": sum(arrivals[f"light request {i}"] for i in range(light))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variant", action="append", help="gateway flags to try beside its defaults "
                        f"(repeatable; default: {' '.join(DEFAULT_VARIANTS)!r})")
    parser.add_argument("--requests", type=int, default=8, help="identity: requests per tenant")
    parser.add_argument("--bad", type=int, default=40, help="over-long prompts the bad tenant sends")
    parser.add_argument("--window", type=float, default=30.0, help="how long the light tenant sends, s")
    parser.add_argument("--period", type=float, default=0.5, help="the light tenant's pause between requests, s")
    parser.add_argument("--forwarding", action="store_true", help="instead: which identity headers and body "
                        "fields the gateway passes on, seen by a stand-in worker (seconds, no model)")
    parser.add_argument("--throttled", action="store_true", help="instead: what the gateway does with a worker's "
                        "429 + Retry-After to one tenant, seen by stand-in workers (seconds, no model)")
    parser.add_argument("--gateway", choices=sorted(GATEWAYS), default="smg", help="which gateway (default smg)")
    parser.add_argument("--log-dir", default="/tmp/behind-gateway", help="where the servers' and gateway's logs go")
    args = parser.parse_args(argv)
    if missing := gateway_missing(args.gateway):
        print(f"cannot run: {missing}", file=sys.stderr)
        return 2
    if args.forwarding:
        for path, fields in asyncio.run(forwarding(Path(args.log_dir) / "forwarding", args.gateway)).items():
            print(f"{path}: " + ", ".join(f"{field} {'passed' if ok else 'DROPPED'}" for field, ok in fields.items()))
        return 0
    variants = [""] + (args.variant or DEFAULT_VARIANTS)
    if args.throttled:
        for k, variant in enumerate(variants):
            seen = asyncio.run(throttled(variant.split(), Path(args.log_dir) / f"throttled-{k}", args.bad,
                                         args.requests, args.gateway))
            print(f"== {variant or 'gateway defaults'}")
            print(f"  throttled tenant: {args.bad} requests answered {seen['throttled']}, Retry-After passed on "
                  f"{seen['retry_after_passed']}; each reached a worker {seen['attempts']['min']}-"
                  f"{seen['attempts']['max']} times ({seen['attempts']['total']} in all), slowest answer "
                  f"{seen['throttled_latency_max_s']:.2f} s")
            print(f"  light tenant after it: {args.requests} requests answered {seen['light']}, "
                  f"{seen['light_reached_workers']} reached a worker")
        return 0
    with contextlib.ExitStack() as stack:
        # The workers serve every gateway setting in turn (each setting its own gateway in front of them):
        # what a setting's tenants were charged is what the workers' counters gained during its run.
        workers = start_workers(stack, core_slices(2), SERVER, Path(args.log_dir) / "workers")
        for k, variant in enumerate(variants):
            flags = variant.split()
            name = variant or "gateway defaults"
            print(f"[{name}] starting ...", file=sys.stderr, flush=True)
            with Gateway.around([w.base_url for w in workers], GATEWAY + flags,
                                log_dir=Path(args.log_dir) / f"variant-{k}", kind=args.gateway) as gateway:
                dead = [i for i, worker in enumerate(workers) if worker.poll() is not None]
                if dead:
                    raise SystemExit(f"worker(s) {dead} exited during the previous setting; logs in {args.log_dir}")
                time.sleep(2 * METRICS_REFRESH_S)  # the last setting's charges are on /metrics
                before = service_by_worker(workers)
                asyncio.run(identity(gateway.base_url, args.requests))
                time.sleep(2 * METRICS_REFRESH_S)
                charged = [gained(earlier, after) for earlier, after in zip(before, service_by_worker(workers))]
                result = asyncio.run(bad_tenant(gateway.base_url, args.bad, args.window, args.period,
                                                bad_after_s=3.0))
            report(name, flags, charged, result, args)
    return 0


def report(name: str, flags: Sequence[str], charged: list[dict[str, float]], result: dict,
           args: argparse.Namespace) -> None:
    print(f"== {name} ({' '.join(GATEWAY + flags)})")
    for i, per_client in enumerate(charged):
        shown = ", ".join(f"{c} {v:.0f}" for c, v in sorted(per_client.items())) or "nothing charged"
        print(f"  worker {i} charged: {shown}")
    span = ("" if result["failing_from_s"] is None else
            f", failing from {result['failing_from_s']:.1f} s to {result['failing_until_s']:.1f} s")
    print(f"  bad tenant: {args.bad} over-long prompts at 3 s, answered {result['bad']}")
    print(f"  light tenant: {result['failed']} of {result['light']} requests failed {result['statuses']}{span}"
          f" (window {args.window:g} s)")


if __name__ == "__main__":
    sys.exit(main())
