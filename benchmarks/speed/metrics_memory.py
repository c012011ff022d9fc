"""Memory under unbounded client ids, with metrics on: does the server give it back?

Starts the tiny CPU server (``--policy dlpm --enable-metrics``, a short
``--fair-idle-timeout``), then measures at three points:

* start: after one warm-up request;
* after: once ``--ids`` requests, each from a distinct client id, are answered;
* past the idle timeout: ``--fair-idle-timeout`` + 5 s later, idle.

Each point reports the scheduler's RSS, the ``/metrics`` body size, the number
of ``sglang_fair_`` series and of distinct ``client`` labels on it, and the
size of SGLang's Prometheus directory. Ratios are to the start, measured in
the same run; the target is RSS and series back within 10% of the start past
the idle timeout (PASS/FAIL). Every request must get exactly one answer.

    PYTHONPATH=. python benchmarks/speed/metrics_memory.py [--ids 20000] [--idle-timeout 15] [--concurrency 32] [--json out.json]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil

from sglang_fair.testing.server import LocalServer

TARGET = 1.10  # past the idle timeout, within 10% of the start


def _post(server: LocalServer, client: str) -> int:
    body = json.dumps({"input_ids": [1, 2, 3, 4], "sampling_params": {"max_new_tokens": 1}}).encode()
    req = urllib.request.Request(server.url("/generate"), data=body,
                                 headers={"Content-Type": "application/json", "X-Client-Id": client})
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            resp.read()
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


def _scheduler(server: LocalServer) -> psutil.Process:
    """The scheduler process (SGLang titles it ``sglang::scheduler``)."""
    for proc in psutil.Process(server.pid).children(recursive=True):
        try:
            if "scheduler" in " ".join(proc.cmdline()):
                return proc
        except psutil.Error:
            continue
    raise RuntimeError("no scheduler process found under the server")


def _prometheus_dir(started: float) -> str | None:
    """SGLang's Prometheus directory: it sets PROMETHEUS_MULTIPROC_DIR inside its processes (a fresh
    temporary directory), so it is found by the scheduler's file in it, the newest since ``started``."""
    import glob
    import tempfile

    found = [p for p in glob.glob(os.path.join(tempfile.gettempdir(), "*", "gauge_mostrecent_sglangfair-dp0.db"))
             if os.path.getmtime(p) >= started]
    return os.path.dirname(max(found, key=os.path.getmtime)) if found else None


def _dir_bytes(path: str | None) -> int:
    if not path or not os.path.isdir(path):
        return 0
    return sum(entry.stat().st_size for entry in os.scandir(path) if entry.is_file())


def measure(server: LocalServer, scheduler: psutil.Process, prometheus_dir: str | None) -> dict:
    with urllib.request.urlopen(server.url("/metrics"), timeout=60) as resp:
        text = resp.read().decode()
    ours = [line for line in text.splitlines() if line.startswith("sglang_fair_")]
    clients = {m.group(1) for line in ours if (m := re.search(r'client="([^"]*)"', line))}
    return {"rss_mb": scheduler.memory_info().rss / 2**20, "metrics_kb": len(text.encode()) / 1024,
            "fair_series": len(ours), "client_labels": len(clients), "prometheus_dir_kb": _dir_bytes(prometheus_dir) / 1024}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ids", type=int, default=20_000, help="distinct client ids, one request each")
    parser.add_argument("--idle-timeout", type=float, default=15.0, help="--fair-idle-timeout of the server")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--json", type=Path, help="write the measurements here")
    args = parser.parse_args(argv)

    server_args = ["--policy", "dlpm", "--enable-metrics", "--fair-idle-timeout", str(args.idle_timeout)]
    print(f"starting the tiny CPU server ({' '.join(server_args)}) ...", flush=True)
    launched = time.time()
    with LocalServer(module="sglang_fair.launch_server", extra_args=server_args, skip_tokenizer_init=True) as server:
        scheduler = _scheduler(server)
        assert _post(server, "warm-up") == 200
        time.sleep(2)  # one refresh
        prometheus_dir = _prometheus_dir(launched)
        points = {"start": measure(server, scheduler, prometheus_dir)}
        statuses: dict[int, int] = {}
        started = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(args.concurrency) as pool:
            for done, status in enumerate(pool.map(lambda i: _post(server, f"id-{i:06d}"), range(args.ids)), 1):
                statuses[status] = statuses.get(status, 0) + 1
                if done % max(1, args.ids // 10) == 0:
                    print(f"  {done}/{args.ids} answered ({time.monotonic() - started:.0f} s)", flush=True)
        time.sleep(2)
        points["after"] = measure(server, scheduler, prometheus_dir)
        print(f"waiting {args.idle_timeout + 5:.0f} s for the idle timeout ...", flush=True)
        time.sleep(args.idle_timeout + 5)
        points["past idle timeout"] = measure(server, scheduler, prometheus_dir)

    answered = sum(statuses.values())
    print(f"\n{args.ids} distinct ids, {answered} answered: {statuses}")
    start = points["start"]
    print(f"{'point':<18}" + "".join(f"{k:>20}" for k in start))
    for name, point in points.items():
        print(f"{name:<18}" + "".join(f"{point[k]:>11.1f} ({point[k] / start[k] if start[k] else 0:>5.2f}x)"
                                      for k in start))
    past = points["past idle timeout"]
    checks = {"rss": past["rss_mb"] / start["rss_mb"], "series": past["fair_series"] / max(1, start["fair_series"])}
    ok = answered == args.ids and all(ratio <= TARGET for ratio in checks.values())
    print("past the idle timeout vs start: " + ", ".join(f"{k} {v:.3f}x" for k, v in checks.items())
          + f" (target <= {TARGET}x): {'PASS' if ok else 'FAIL'}")
    if args.json:
        args.json.write_text(json.dumps({"ids": args.ids, "idle_timeout_s": args.idle_timeout, "statuses": statuses,
                                         "points": points, "ratios_past_timeout": checks, "pass": ok}, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
