"""``--fair-client-weights`` through the cluster-wide DLPM router (``d2lpm_global``) on the real CPU server.

``--policy dlpm --dp 2`` with ``alice=2``: two clients each send the same
number of equal requests at once. The router holds nearly all of them (one
place in each worker's local queue, two running), so its order decides who
is served first; a quantum of about one request per refill makes each round
admit two of alice's for one of bob's. Between the first requests (placed
before anything queues) and alice's last, two of alice's finish for each of
bob's. Run on both of SGLang's backends: scheduler
processes, and Ray actors (``--use-ray``), whose router settings travel the
same way.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import threading

import pytest

pytestmark = pytest.mark.server

from sglang_fair import cpu_standins  # noqa: E402
from sglang_fair.testing.server import LocalServer  # noqa: E402

REQUESTS_EACH = 18
PROMPT_TOKENS, MAX_NEW = 48, 8
# Each request costs 48 + 2 x 8 = 64 (input weight 1, output weight 2): a quantum of 70 admits one
# of bob's per refill, and two of alice's, whose charges are halved.
QUANTUM = 70
# Two workers, each with two running and one in its local queue.
IN_FLIGHT = 2 * (2 + 1)


@pytest.fixture(scope="module", params=["process", "ray"])
def server(request):
    env = {"PYTHONPATH": os.pathsep.join(p for p in [str(cpu_standins.SITE), os.environ.get("PYTHONPATH", "")] if p)}
    args = ["--policy", "dlpm", "--dp", "2", "--max-running-requests", "2", "--fair-quantum", str(QUANTUM),
            "--fair-client-weights", "alice=2", "--fair-router-options", json.dumps({"local_queue_requests": 1})]
    with contextlib.ExitStack() as stack:
        if request.param == "ray":
            pytest.importorskip("ray")
            from sglang_fair.testing.ray_cluster import ray_backend

            ray_args, ray_env = stack.enter_context(ray_backend(num_gpus=2))
            args += ray_args
            env.update(ray_env)
        yield stack.enter_context(LocalServer(module="sglang_fair.launch_server", extra_args=args,
                                              skip_tokenizer_init=True, env=env))


def test_a_client_weighted_two_is_served_twice_as_much_through_the_router(server: LocalServer) -> None:
    info = server.get_json("/server_info")
    assert info["load_balance_method"] == "d2lpm_global"
    done: list[str] = []
    lock = threading.Lock()

    def send(client: str, i: int) -> None:
        offset = 1 if client == "alice" else 500  # distinct prompts: no client finds the other's cached
        ids = [offset + (7 * i + j) % 450 for j in range(PROMPT_TOKENS)]
        body = {"input_ids": ids, "sampling_params": {"max_new_tokens": MAX_NEW, "ignore_eos": True}}
        reply = server.post_json("/generate", body, headers={"X-Client-Id": client}, timeout=300)
        assert reply["meta_info"]["completion_tokens"] == MAX_NEW
        with lock:
            done.append(client)

    with concurrent.futures.ThreadPoolExecutor(2 * REQUESTS_EACH) as pool:
        futures = [pool.submit(send, client, i) for i in range(REQUESTS_EACH) for client in ("bob", "alice")]
        for future in futures:
            future.result()

    # The first IN_FLIGHT requests reach the workers before anything queues at the router, in whatever
    # order the threads ran; from then until alice's last is done the router's order alone decides.
    last_alice = max(i for i, client in enumerate(done) if client == "alice")
    contended = done[IN_FLIGHT:last_alice + 1]
    # Twice as much service: two of alice's done for each of bob's (equal shares: one for one).
    ratio = contended.count("alice") / max(contended.count("bob"), 1)
    assert 1.5 <= ratio <= 3.0, (ratio, done)
