"""D²LPM inside SGLang's data-parallel controller, against the real CPU server at --dp 2.

Each test runs on both of SGLang's backends: scheduler processes, and Ray
actors (``--use-ray``, on a local Ray cluster with logical GPUs, the router's
sockets on this machine's network address as for workers on other nodes:
``SGLANG_FAIR_ROUTER_HOST``). One server
per backend (startup dominates on 2 cores); the test that kills a worker runs
last. The response's ``meta_info.dp_rank`` says which worker served a request.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import re
import time

import psutil
import pytest

pytestmark = pytest.mark.server

from sglang_fair import cpu_standins  # noqa: E402
from sglang_fair.testing.server import LocalServer  # noqa: E402
from tests.binding.flood import run_flood  # noqa: E402
from tests.support.http import call, metric, metrics_text, wait_until  # noqa: E402

PREFIX = [7 + (i % 900) for i in range(400)]
ADMIN_KEY = "admin-secret"


class _Servers:
    """One backend's servers: the stock launcher with the d2lpm router over two workers, as processes or
    Ray actors. A test that breaks a server takes it (``take``); a later test gets a fresh one."""

    def __init__(self, backend: str) -> None:
        self.stack = contextlib.ExitStack()
        self.env = {"PYTHONPATH": os.pathsep.join(p for p in [str(cpu_standins.SITE), os.environ.get("PYTHONPATH", "")]
                                                  if p)}
        if "SGLANG_FAIR_ROUTER_KV_PORT" in os.environ:
            self.env["SGLANG_FAIR_ROUTER_KV_PORT"] = os.environ["SGLANG_FAIR_ROUTER_KV_PORT"]
        self.args = ["--dp", "2", "--load-balance-method", "d2lpm", "--schedule-policy", "dlpm", "--enable-metrics",
                     "--admin-api-key", ADMIN_KEY]
        if backend == "ray":
            pytest.importorskip("ray")
            from sglang_fair.testing.ray_cluster import ray_backend

            ray_args, ray_env = self.stack.enter_context(ray_backend(num_gpus=2))
            self.args += ray_args
            self.env.update(ray_env)
        self.current: LocalServer | None = None
        self.failed: str | None = None

    def running(self) -> LocalServer:
        """The backend's intact server, started if there is none (one failed start fails every test)."""
        if self.failed is not None:
            pytest.fail(f"the module's server did not start:\n{self.failed}")
        if self.current is None:
            try:
                self.current = self.stack.enter_context(LocalServer(extra_args=self.args, skip_tokenizer_init=True,
                                                                    env=self.env))
            except Exception as error:
                self.failed = str(error)
                raise
        return self.current

    def take(self) -> LocalServer:
        """The intact server, for a test that kills its workers: no other test gets it afterwards."""
        server, self.current = self.running(), None
        return server


@pytest.fixture(scope="module", params=["process", "ray"])
def servers(request):
    """Per backend, shared by this module's tests; the worker-killing test runs last, on the same server."""
    held = _Servers(request.param)
    with held.stack:
        yield held


@pytest.fixture
def server(servers: _Servers) -> LocalServer:
    return servers.running()


def generate(server: LocalServer, ids: list[int], client: str, max_new: int = 4, timeout: float = 120.0) -> dict:
    body = {"input_ids": ids, "sampling_params": {"max_new_tokens": max_new, "ignore_eos": True}}
    return server.post_json("/generate", body, headers={"X-Client-Id": client}, timeout=timeout)


def test_requests_sharing_a_prefix_land_on_the_worker_that_holds_it(server: LocalServer) -> None:
    first = generate(server, PREFIX + [950, 1], "alice")["meta_info"]
    holder = first["dp_rank"]
    for i in range(5):
        meta = generate(server, PREFIX + [951 + i, 2, 3], "alice")["meta_info"]
        assert meta["dp_rank"] == holder
        assert meta["cached_tokens"] >= len(PREFIX)
    # Another client's unrelated prompt is not pulled to the busy holder.
    other = [(13 * i) % 1000 + 1 for i in range(300)]
    generate(server, other, "bob")
    meta = generate(server, other + [5], "bob")["meta_info"]
    assert meta["cached_tokens"] >= len(other)
    # The holder's KV events reach the router (its publisher connects to the router's port).
    expected = f"receiving KV events from worker {holder}"
    host = server.env.get("SGLANG_FAIR_ROUTER_HOST", "127.0.0.1")
    assert f'"endpoint": "tcp://{host}:' in server.log_tail(100_000)  # where the publishers connect
    deadline = time.monotonic() + 10
    while expected not in server.log_tail(10_000) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert expected in server.log_tail(10_000)


def test_a_flooding_client_does_not_starve_a_light_one(server: LocalServer) -> None:
    result = run_flood(server.base_url, duration_s=12.0, grace_s=20.0, heavy_concurrency=16, max_new=16)
    assert not result.errors, result.errors[:3]
    assert len(result.light_latencies) >= 3
    assert result.light_worst < 15.0, result.light_latencies
    assert result.heavy_done > 0


def test_router_state_is_on_metrics(server: LocalServer) -> None:
    # Once its request is answered, nothing is in flight and the client has D²LPM deficits.
    generate(server, [(7 * i) % 1000 + 1 for i in range(40)], "metered")

    def idle_and_metered(text: str) -> bool:  # the gauges are refreshed periodically: wait for both
        inflight = re.findall(r'^sglang_fair_router_inflight_requests\{dp_rank="(\d)"\} (\S+)$', text, re.M)
        metered = re.search(r'^sglang_fair_router_client_deficit\{client="metered",dp_rank="\d"\} ', text, re.M)
        return sorted(inflight) == [("0", "0.0"), ("1", "0.0")] and metered is not None

    text = wait_until(lambda: metrics_text(server), idle_and_metered, timeout_s=10, interval_s=1,
                      what="no request in flight, and the client's deficit")
    assert re.search(r'^sglang_fair_router_worker_alive\{dp_rank="1"\} 1\.0$', text, re.M)


def _worker_pids(server: LocalServer) -> dict[int, int]:
    """dp rank -> pid of its scheduler (a process of the server's, or a Ray actor), as the router logs it."""
    found = re.findall(r"sglang-fair router: worker (\d+) is process (\d+)", server.log_tail(100_000))
    return {int(rank): int(pid) for rank, pid in found}


def _post(server: LocalServer, ids: list[int], client: str, max_new: int) -> tuple[int, dict]:
    body = {"input_ids": ids, "sampling_params": {"max_new_tokens": max_new, "ignore_eos": True}}
    reply = call(server.url("/generate"), body, {"X-Client-Id": client}, timeout=180)
    return reply.status, reply.json({})


def _wait_for_inflight(server: LocalServer, rank: int, busy: bool = True, timeout_s: float = 60.0) -> None:
    """Until the router's gauge shows requests in flight on ``rank`` (``busy``), or none."""
    wait_until(lambda: metric(metrics_text(server), "sglang_fair_router_inflight_requests", dp_rank=str(rank)),
               lambda found: (found is not None and found > 0) == busy, timeout_s, 0.2,
               f"{'a' if busy else 'no'} request in flight on worker {rank}")


def test_a_killed_worker_fails_its_requests_once_and_is_routed_around(servers: _Servers) -> None:
    # This test kills a worker, then stops the server: it takes the server for itself.
    _kill_a_worker_and_stop(servers.take())


def _kill_a_worker_and_stop(server: LocalServer) -> None:
    pids = _worker_pids(server)
    assert set(pids) == {0, 1}, pids
    assert _http_get(server, "/health")[0] == 200
    _wait_for_inflight(server, rank=1, busy=False)
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        # Long enough that a quiet machine is still decoding them when the worker dies.
        futures = [pool.submit(_post, server, [(97 * c + i) % 1000 + 1 for i in range(64)], f"c{c}", 600)
                   for c in range(8)]
        _wait_for_inflight(server, rank=1)
        psutil.Process(pids[1]).kill()
        results = [f.result(timeout=200) for f in futures]
    ok, failed = [], []
    for status, body in results:
        finish = (body.get("meta_info") or {}).get("finish_reason") or {}
        (ok if status == 200 and finish.get("type") != "abort" else failed).append((status, body))
    # Every request got exactly one answer: a full one from worker 0, or an
    # explicit error for those that were on the dead worker.
    assert failed, "nothing was running on the killed worker"
    assert all(body["meta_info"]["dp_rank"] == 0 for _, body in ok)
    for status, body in failed:
        assert status == 503 and "worker 1 died" in json.dumps(body), (status, body)
    # Only those: completions of earlier requests reached the router over the
    # side channel, so it did not count them as still in flight.
    assert f"worker 1 died; failing its {len(failed)} requests in flight" in server.log_tail(400)
    # The router no longer sends anything to worker 1.
    for i in range(4):
        meta = generate(server, [(31 * i + j) % 1000 + 1 for j in range(32)], "after", timeout=60)["meta_info"]
        assert meta["dp_rank"] == 0
    # Health tells: 503 naming the dead worker (the server serves on at half capacity until restarted).
    for path in ("/health", "/health_generate"):
        status, body = _http_get(server, path)
        assert status == 503 and json.loads(body)["dead_workers"] == [1], (path, status, body)
    # The state requests SGLang sends every worker are answered for the dead one by the controller:
    # /server_info, and /fair/settings read and changed, each within seconds, from the survivor.
    started = time.monotonic()
    status, body = _http_get(server, "/server_info")
    info = json.loads(body)
    assert status == 200 and info["fair_router"]["workers"] == {"alive": [0], "dead": [1]}, info
    assert "--dp" in info["launch_command"]
    states = {state.get("dp_rank", state.get("fair", {}).get("dp_rank")): state for state in info["internal_states"]}
    assert states[0]["fair"]["policy"] == "dlpm" and states[1] == {"dp_rank": 1, "dead_worker": True}, states
    admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
    status, body = _http_get(server, "/fair/settings", headers=admin)
    assert status == 200 and json.loads(body)["dead_ranks"] == [1], body
    ranks = json.loads(body)["ranks"]
    assert ranks[0]["policy"] == "dlpm" and ranks[1] is None, ranks
    changed = server.post_json("/fair/settings", {"quantum": 777}, headers=admin, timeout=5)
    assert changed["ranks"][0]["quantum"] == 777 and changed["dead_ranks"] == [1], changed
    assert time.monotonic() - started < 15  # three requests, each of which used to wait forever
    # And SIGTERM still ends the whole server, promptly (it once hung here).
    stopping = time.monotonic()
    code = server.stop(graceful=True)
    assert time.monotonic() - stopping < 30 and code is not None and code != -9, code


def _http_get(server: LocalServer, path: str, headers: dict | None = None) -> tuple[int, bytes]:
    reply = call(server.url(path), headers=headers, timeout=60)
    return reply.status, reply.body
