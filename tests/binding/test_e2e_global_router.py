"""End to end: the default data-parallel router (``d2lpm_global``) in the real CPU server at --dp 2.

``python -m sglang_fair.launch_server --policy dlpm --dp 2`` with no
``--load-balance-method``: the launcher picks ``d2lpm_global``. Two clients:
``wide`` keeps many requests with unrelated prompts in flight (they spread
over both workers), ``pinned`` has two closed-loop programs whose prompts all
share a long prefix (they stay with the worker that caches it). Short local
queues (two requests per worker) and small batches make the router hold
requests, so the late-binding path (holding, admission and progress reports,
release) carries the run. The bench's HTTP backend replays it into a run
directory and ``python -m sglang_fair.bench audit`` holds it against
Theorem G's bound. The workers mix chunks of 256 tokens, so the pinned
prefix is prefilled in six and the router's rule for such prompts is on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.server

from sglang_fair import cpu_standins  # noqa: E402
from sglang_fair.bench.backends import make_backend  # noqa: E402
from sglang_fair.bench.output import write_run  # noqa: E402
from sglang_fair.metrics.service import ServiceWeights  # noqa: E402
from sglang_fair.testing.server import LocalServer  # noqa: E402
from sglang_fair.workloads.model import Call, Program, Workload  # noqa: E402
from tests.support.router_gauges import held_and_inflight  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
ROUTER_OPTIONS = {"local_queue_requests": 2}
CHUNK = 256
# Longer than the most work a worker holds in flight here once the first pinned calls are
# done (4 running and up to 3 locally queued requests of at most 48 + 2 x 48 service units):
# Preble's rebalance moves a request off the worker caching its prefix only when that worker's
# load exceeds 1.5 x the other's plus the prefill it would recompute, so here it never may,
# whatever the timing. (At 512 tokens it did once the other worker had drained: one pinned
# program moved and computed the prefix again.)
PREFIX = tuple(11 + (i * 7) % 900 for i in range(1536))
# Long enough that requests stay held across several of the router's once-a-second gauge
# refreshes: at 16 new tokens a fast CPU finished the held stretch between two of them.
MAX_NEW = 48
WIDE_PROGRAMS, WIDE_CALLS = 24, 2  # with 4 running + 2 locally queued per worker, the router must hold some
PINNED_PROGRAMS, PINNED_CALLS = 2, 5


def _workload() -> Workload:
    wide = [
        Program(f"wide-{p}", "wide", 0.0, tuple(
            Call(tokens=tuple((97 * p + 31 * c + 13 * i) % 1000 + 1 for i in range(48)), max_new_tokens=MAX_NEW,
                 parents=(c - 1,) if c else ())
            for c in range(WIDE_CALLS)
        ))
        for p in range(WIDE_PROGRAMS)
    ]
    pinned = [
        Program(f"pinned-{p}", "pinned", 0.0, tuple(
            Call(tokens=PREFIX + (901 + p, 950 + c, 3), max_new_tokens=MAX_NEW, parents=(c - 1,) if c else ())
            for c in range(PINNED_CALLS)
        ))
        for p in range(PINNED_PROGRAMS)
    ]
    return Workload("wide-and-pinned", wide + pinned, seed=0, meta={"vocab_size": 1024})


class RouterWatcher(threading.Thread):
    """Polls the router's gauges on /metrics; keeps the most requests held, and in flight on a worker."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url, self.most_held, self.most_inflight, self.done = url, 0.0, 0.0, threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.3):
            try:
                with urllib.request.urlopen(self.url, timeout=10) as reply:
                    text = reply.read().decode()
            except OSError:
                continue
            held, inflight = held_and_inflight(text)
            self.most_held = max(self.most_held, held)
            self.most_inflight = max([self.most_inflight, *inflight])


@pytest.fixture(scope="module")
def server():
    # Mixed chunks of 256 tokens: the pinned prefix takes two, so the router also keeps other
    # prompts off a worker prefilling it (it learns the chunk size from these flags).
    args = ["--policy", "dlpm", "--dp", "2", "--enable-metrics", "--max-running-requests", "4",
            "--enable-mixed-chunk", "--chunked-prefill-size", str(CHUNK),
            "--fair-router-options", json.dumps(ROUTER_OPTIONS)]
    env = {"PYTHONPATH": os.pathsep.join(p for p in [str(cpu_standins.SITE), os.environ.get("PYTHONPATH", "")] if p)}
    with LocalServer(module="sglang_fair.launch_server", extra_args=args, skip_tokenizer_init=True, env=env) as s:
        yield s


def test_both_clients_are_served_and_the_run_is_within_theorem_g(server: LocalServer, tmp_path: Path) -> None:
    info = server.get_json("/server_info")
    assert info["load_balance_method"] == "d2lpm_global"  # the launcher's default under --policy dlpm
    watcher = RouterWatcher(server.url("/metrics"))
    watcher.start()
    backend = make_backend(server.base_url, policy="dlpm", timeout_s=120.0)
    workload = _workload()
    try:
        result = backend.run(workload, progress=False)
    finally:
        watcher.done.set()
        watcher.join()
    run_dir = tmp_path / "run"
    write_run(run_dir, result, {"workload": workload.name, "policy": "dlpm"}, {"wide": True, "pinned": True},
              ServiceWeights(1.0, 2.0, "extend"))

    assert not result.partial, result.errors[:3] or [r.error for r in result.records if not r.ok][:3]
    by_client = {c: [r for r in result.records if r.client == c] for c in ("wide", "pinned")}
    assert len(by_client["wide"]) == WIDE_PROGRAMS * WIDE_CALLS
    assert len(by_client["pinned"]) == PINNED_PROGRAMS * PINNED_CALLS
    for client, records in by_client.items():
        assert all(r.output_tokens == MAX_NEW and r.t_admitted is not None for r in records), client
    assert {r.worker for r in by_client["wide"]} == {0, 1}  # spread over both workers
    # The pinned client's prefix is found cached: each program stays with the worker that computed
    # it, and every call after a program's first finds the whole prefix there. The two first calls
    # come together, before either worker caches the prefix: under the default latency isolation a
    # client with nothing dispatched takes the place each local queue keeps for newcomers, so the
    # second may start on the other worker (it then caches the prefix too). A first call may find
    # part of it: the other program's first call is still prefilling it, chunk by chunk. Once both
    # workers cache the prefix, a later call may go to either (the index learns of a worker's
    # prefix from its KV events, a moment after the prefill), but still finds the whole prefix there.
    placed = sorted((r.program_id, r.call_index, r.worker, r.cached_tokens) for r in by_client["pinned"])
    if len({worker for _, call, worker, _ in placed if call == 0}) == 1:  # only one worker computed the prefix
        assert len({worker for _, _, worker, _ in placed}) == 1, placed
    assert all((cached or 0) >= len(PREFIX) for _, call, _, cached in placed if call > 0), placed
    assert watcher.most_held > 0, "the router never held a request: the late-binding path was not exercised"
    # A request leaves its worker's local queue when admitted (or finished): more requests
    # in flight on a worker than its local queue holds means the admissions were reported.
    assert watcher.most_inflight > ROUTER_OPTIONS["local_queue_requests"]

    params = result.params
    assert params["router"] == "d2lpm_global" and params["num_workers"] == 2
    # The router prices tokens with the workers' weights (--fair-input-weight/--fair-output-weight defaults),
    # and its DLPM refills by the workers' quantum (--fair-quantum's default).
    # The policy's weights and quantum, the workers' --max-running-requests for the shared-prefill wait
    # and their chunk size for prompts of several chunks.
    # Latency isolation is on by default here (--policy dlpm, --dp 2, d2lpm_global): the router keeps
    # a place for newcomers; its idle timeout is --fair-idle-timeout's default.
    assert params["router_options"] == ROUTER_OPTIONS | {"input_weight": 1.0, "output_weight": 2.0, "quantum": 2048.0,
                                                         "worker_max_running": 4, "worker_chunk_tokens": CHUNK,
                                                         "reserve_for_newcomers": True, "idle_timeout_s": 600.0}
    assert params["kv_pool_tokens"]
    audit = subprocess.run([sys.executable, "-m", "sglang_fair.bench", "audit", str(run_dir)], cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert "d2lpm_global Theorem G" in audit.stdout and "within bound" in audit.stdout


def test_each_rank_runs_on_cores_of_its_own_with_no_binding_given(server: LocalServer) -> None:
    """The launcher bound the ranks (no SGLANG_CPU_OMP_THREADS_BIND in the environment: the
    harness leaves it to the launcher), and every thread of each scheduler keeps to its cores."""
    import psutil

    assert "SGLANG_CPU_OMP_THREADS_BIND" not in os.environ
    with open(server.log_path) as log:
        assert "sglang_fair.launch_server: SGLANG_CPU_OMP_THREADS_BIND=" in log.read()
    ranks = [p for p in psutil.Process(server.pid).children(recursive=True)
             if "scheduler" in " ".join(p.cmdline())]
    assert len(ranks) == 2, [p.cmdline() for p in ranks]
    cores = []
    for rank in ranks:
        per_thread = {frozenset(os.sched_getaffinity(t.id)) for t in rank.threads()}
        assert len(per_thread) == 1, per_thread  # every thread of the rank on the same cores
        cores.append(per_thread.pop())
    assert not cores[0] & cores[1], cores
