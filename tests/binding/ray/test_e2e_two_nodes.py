"""``--use-ray`` across two Ray nodes on this machine: the scheduler actors on the node that is not the head's.

``ray.cluster_utils.Cluster`` starts two raylets: the head (where the server,
its HTTP front and the router run) with no GPU, and a second node with two
logical GPUs, so SGLang's placement puts both scheduler actors there. The
default router (``d2lpm_global``) holds requests until the workers report
admissions and progress: requests are answered only if the actors on the
other node reach the router's report channel (and its KV event sockets), on
``SGLANG_FAIR_ROUTER_HOST``. Without that setting the launch is refused,
naming it, instead of serving a cluster whose reports go nowhere.
"""

from __future__ import annotations

import concurrent.futures
import os

import pytest

pytestmark = pytest.mark.server

pytest.importorskip("ray")
pytest.importorskip("sglang.srt.ray.engine")

from sglang_fair import cpu_standins  # noqa: E402
from sglang_fair.binding.common.settings import HOST_ENV  # noqa: E402
from sglang_fair.testing.ray_cluster import network_address  # noqa: E402
from sglang_fair.testing.server import LocalServer, ServerStartError  # noqa: E402

NO_AUTH = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}


@pytest.fixture(scope="module")
def two_nodes():
    """A head without GPUs and a second node with two logical GPUs (both on this machine)."""
    from ray.cluster_utils import Cluster

    saved = {key: os.environ.get(key) for key in NO_AUTH}
    os.environ.update(NO_AUTH)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "num_gpus": 0})
    try:
        cluster.add_node(num_cpus=2, num_gpus=2)
        cluster.wait_for_nodes()
        yield cluster
    finally:
        cluster.shutdown()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _env(cluster, **more: str) -> dict[str, str]:
    path = os.pathsep.join(p for p in [str(cpu_standins.SITE), os.environ.get("PYTHONPATH", "")] if p)
    return {"PYTHONPATH": path, "RAY_ADDRESS": cluster.address, **NO_AUTH, **more}


ARGS = ["--policy", "dlpm", "--dp", "2", "--use-ray", "--max-running-requests", "4"]


def test_a_router_on_loopback_is_refused_naming_the_setting(two_nodes) -> None:
    # An empty SGLANG_FAIR_ROUTER_HOST is loopback, as when it is not set.
    server = LocalServer(module="sglang_fair.launch_server", extra_args=ARGS, skip_tokenizer_init=True,
                         env=_env(two_nodes, **{HOST_ENV: ""}), startup_timeout_s=240)
    with pytest.raises(ServerStartError) as failed:
        server.start()
    assert "the Ray cluster has 2 nodes" in str(failed.value) and HOST_ENV in str(failed.value)


def test_actors_on_the_other_node_report_to_the_router_and_every_request_is_answered(two_nodes) -> None:
    head = two_nodes.head_node
    others = [node for node in two_nodes.list_all_nodes() if node is not head]
    assert len(others) == 1  # the only GPUs are on the second node: SGLang's actors can run nowhere else
    env = _env(two_nodes, **{HOST_ENV: network_address()})
    with LocalServer(module="sglang_fair.launch_server", extra_args=ARGS, skip_tokenizer_init=True, env=env,
                     startup_timeout_s=300) as server:
        body = {"sampling_params": {"max_new_tokens": 8, "ignore_eos": True}}
        # More requests than the workers' batches and local queues hold: the router holds some,
        # and places them only as the actors' admission and completion reports reach it.
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            replies = list(pool.map(
                lambda i: server.post_json("/generate", {**body, "input_ids": [(7 * i + j) % 900 + 1 for j in range(24)]},
                                           headers={"X-Client-Id": f"c{i % 3}"}, timeout=240),
                range(24)))
        assert all(r["meta_info"]["completion_tokens"] == 8 for r in replies)
        assert {r["meta_info"]["dp_rank"] for r in replies} == {0, 1}
        log = server.log_tail(100_000)
        assert "never reported" not in log
        assert "receiving KV events from worker 0" in log and "receiving KV events from worker 1" in log
