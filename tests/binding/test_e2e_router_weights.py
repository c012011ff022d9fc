"""``--fair-client-weights`` through the cluster-wide DLPM router (``d2lpm_global``) on the real CPU server.

``--policy dlpm --dp 2`` with ``alice=2``: a third client first fills every
place on both workers (two running and one in the local queue each) with
long requests; alice and bob then each send the same number of equal
requests, which the router holds until all of them are there. The long
requests are aborted, and from then on the router's order alone decides who
is served: a quantum of about one request per refill admits two of alice's
for each of bob's, so until alice's last starts, two of hers start for each
of bob's (started: first run by a worker, SGLang's ``forward_entry_time``;
the order replies come back in also holds how each worker's core was shared
meanwhile). Waiting for the router to hold everything keeps the measure free
of how fast a loaded machine delivers the requests. Run on both of SGLang's
backends: scheduler processes, and Ray actors (``--use-ray``), whose router
settings travel the same way.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import threading
import time
import urllib.request

import pytest

pytestmark = pytest.mark.server

from sglang_fair import cpu_standins  # noqa: E402
from sglang_fair.testing.server import LocalServer  # noqa: E402
from tests.support.router_gauges import held_and_inflight  # noqa: E402

REQUESTS_EACH = 18
PROMPT_TOKENS, MAX_NEW = 48, 8
# Each request costs 48 + 2 x 8 = 64 (input weight 1, output weight 2): a quantum of 70 admits one
# of bob's per refill, and two of alice's, whose charges are halved.
QUANTUM = 70
# Two workers, each with two running and one in its local queue.
PLACES = 2 * (2 + 1)
# Long enough to outlast the sending of every request on a loaded machine; aborted once they are held
# (on a fast CPU they may finish on their own just after).
BLOCKER_NEW = 1900  # the tiny model's context is 2048
WAIT_S = 120


@pytest.fixture(scope="module", params=["process", "ray"])
def server(request):
    env = {"PYTHONPATH": os.pathsep.join(p for p in [str(cpu_standins.SITE), os.environ.get("PYTHONPATH", "")] if p)}
    args = ["--policy", "dlpm", "--dp", "2", "--max-running-requests", "2", "--fair-quantum", str(QUANTUM),
            "--fair-client-weights", "alice=2", "--fair-router-options", json.dumps({"local_queue_requests": 1}),
            "--enable-metrics",
            # Isolation (on by default here) keeps a place in each local queue for a client with nothing
            # dispatched: alice's and bob's first requests would go at once, not wait to be held.
            "--no-fair-isolation"]
    with contextlib.ExitStack() as stack:
        if request.param == "ray":
            pytest.importorskip("ray")
            from sglang_fair.testing.ray_cluster import ray_backend

            ray_args, ray_env = stack.enter_context(ray_backend(num_gpus=2))
            args += ray_args
            env.update(ray_env)
        yield stack.enter_context(LocalServer(module="sglang_fair.launch_server", extra_args=args,
                                              skip_tokenizer_init=True, env=env))


def wait_for_router(server: LocalServer, held: int, inflight: int) -> None:
    """Until the router's gauges (refreshed each second) show ``held`` requests held and ``inflight`` on workers."""
    deadline = time.monotonic() + WAIT_S
    seen, workers_seen = None, 0
    while time.monotonic() < deadline:
        now_held, per_worker = held_and_inflight(server.get_text("/metrics", timeout=30))
        seen, workers_seen = (now_held, sum(per_worker)), len(per_worker)
        if seen == (held, inflight):
            return
        time.sleep(0.3)
    # No per-worker series at all means the router's gauges never reached /metrics, not a slow router.
    raise AssertionError(f"the router never showed {held} held and {inflight} in flight; last seen {seen} "
                         f"with {workers_seen} per-worker series\n{server.log_tail(60)}")


def abort(server: LocalServer, rid: str) -> None:
    """SGLang's ``/abort_request``, which answers 200 with an empty body."""
    request = urllib.request.Request(server.url("/abort_request"), data=json.dumps({"rid": rid}).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as reply:
        assert reply.status == 200


def prompt(offset: int, i: int, span: int = 450) -> list[int]:
    # Distinct prompts: no client finds another's cached (alice's ids start at 1, bob's at 500,
    # carol's at 950; the tiny model's vocabulary ends at 1023).
    return [offset + (7 * i + j) % span for j in range(PROMPT_TOKENS)]


def test_a_client_weighted_two_is_served_twice_as_much_through_the_router(server: LocalServer) -> None:
    info = server.get_json("/server_info")
    assert info["load_balance_method"] == "d2lpm_global"
    started: list[tuple[float, str]] = []
    lock = threading.Lock()

    all_held = threading.Event()  # the router was seen holding every one of alice's and bob's

    def block(i: int) -> None:
        body = {"input_ids": prompt(950, i, span=70), "rid": f"blocker-{i}",
                "sampling_params": {"max_new_tokens": BLOCKER_NEW, "ignore_eos": True}}
        reply = server.post_json("/generate", body, headers={"X-Client-Id": "carol"}, timeout=300)
        # A blocker must last until the router holds everything; one that runs to its length after
        # that (a fast CPU decodes its 1,900 tokens in seconds) frees its place no differently
        # from an abort: the router's order still picks what runs next.
        if reply["meta_info"]["finish_reason"]["type"] != "abort":
            assert all_held.is_set(), "a blocker finished before the router held all"

    def send(client: str, i: int) -> None:
        body = {"input_ids": prompt(1 if client == "alice" else 500, i),
                "sampling_params": {"max_new_tokens": MAX_NEW, "ignore_eos": True}}
        reply = server.post_json("/generate", body, headers={"X-Client-Id": client}, timeout=300)
        assert reply["meta_info"]["completion_tokens"] == MAX_NEW
        with lock:
            started.append((reply["meta_info"]["forward_entry_time"], client))

    with concurrent.futures.ThreadPoolExecutor(PLACES + 2 * REQUESTS_EACH) as pool:
        blockers = [pool.submit(block, i) for i in range(PLACES)]
        wait_for_router(server, held=0, inflight=PLACES)
        futures = [pool.submit(send, client, i) for i in range(REQUESTS_EACH) for client in ("bob", "alice")]
        wait_for_router(server, held=2 * REQUESTS_EACH, inflight=PLACES)
        all_held.set()
        assert not started
        for i in range(PLACES):
            abort(server, f"blocker-{i}")
        for future in blockers + futures:
            future.result()

    # Twice as much service: two of alice's started for each of bob's (equal shares: one for one).
    order = [client for _, client in sorted(started)]
    last_alice = max(i for i, client in enumerate(order) if client == "alice")
    contended = order[:last_alice + 1]
    ratio = contended.count("alice") / max(contended.count("bob"), 1)
    assert 1.5 <= ratio <= 3.0, (ratio, order)
