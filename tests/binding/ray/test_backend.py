"""SGLang's Ray backend hooks without a server (the server tests run both backends)."""

from __future__ import annotations

import json
import types

import pytest

pytestmark = pytest.mark.engine

pytest.importorskip("ray")
pytest.importorskip("sglang.srt.ray.engine")

import sglang.srt.runtime_context as runtime_context  # noqa: E402

from sglang_fair.binding.ray import backend as ray_backend
from sglang_fair.binding.common import settings  # noqa: E402
from sglang_fair.binding.common.settings import ROUTER_ENV, WORKER_ENV, RouterSettings  # noqa: E402


def test_actors_get_the_plugin_setup_and_the_launchers_sglang_settings(monkeypatch) -> None:
    monkeypatch.setenv(ROUTER_ENV, json.dumps({"method": "d2lpm", "options": {}}))
    monkeypatch.setenv(WORKER_ENV, '{"quantum": 512}')
    monkeypatch.setenv("UNRELATED_SETTING", "1")
    monkeypatch.delenv(settings.HOST_ENV, raising=False)
    env = ray_backend.worker_runtime_env()
    assert env["worker_process_setup_hook"] == "sglang_fair.binding.ray.backend.worker_setup"
    assert env["env_vars"][WORKER_ENV] == '{"quantum": 512}'
    assert "UNRELATED_SETTING" not in env["env_vars"]
    # The side channel's address is fixed before any actor exists, and the
    # controller binds that same address later.
    feedback = env["env_vars"][settings.FEEDBACK_ENV]
    assert feedback.startswith("ipc://")
    assert RouterSettings.load("d2lpm").feedback == feedback
    assert ray_backend.worker_runtime_env()["env_vars"][settings.FEEDBACK_ENV] == feedback


def test_without_a_fair_router_no_side_channel_is_reserved(monkeypatch) -> None:
    monkeypatch.delenv(ROUTER_ENV, raising=False)
    monkeypatch.delenv(settings.FEEDBACK_ENV, raising=False)
    assert settings.FEEDBACK_ENV not in ray_backend.worker_runtime_env()["env_vars"]
    assert settings.FEEDBACK_ENV not in ray_backend.worker_runtime_env("round_robin")["env_vars"]


def test_a_router_chosen_without_the_command_line_gets_defaults_and_a_side_channel(monkeypatch) -> None:
    monkeypatch.delenv(ROUTER_ENV, raising=False)  # e.g. RayEngine(load_balance_method="d2lpm")
    env = ray_backend.worker_runtime_env("d2lpm")["env_vars"]
    config = RouterSettings.load("d2lpm")
    assert config.options == {} and config.feedback == env[settings.FEEDBACK_ENV]


def _parallel(dp: int, tp: int = 1, pp: int = 1, attn_dp: bool = False):
    return types.SimpleNamespace(num_dp_ranks=dp, tp_size=tp, pp_size=pp, attn_dp_enabled=attn_dp)


def test_too_few_gpus_is_an_error_not_a_hang(monkeypatch) -> None:
    monkeypatch.setattr(runtime_context, "get_parallel", lambda: _parallel(dp=4, tp=2))
    with pytest.raises(RuntimeError, match=r"needs 8 GPUs .* it has 2\b.*--num-gpus 8"):
        ray_backend._check_gpus(2.0)
    ray_backend._check_gpus(8.0)
    monkeypatch.setattr(runtime_context, "get_parallel", lambda: _parallel(dp=4, tp=2, attn_dp=True))
    ray_backend._check_gpus(2.0)  # DP attention folds the ranks into tp


class Args:
    def __init__(self) -> None:
        self._resolved_overrides = [("earlier", {"x": 1})]


def test_the_dp_launch_gets_an_unpublished_copy(monkeypatch) -> None:
    published = Args()
    seen = []

    def launch(cls, server_args, *args, **kwargs):
        seen.append(server_args)
        server_args._resolved_overrides.append(("ray.dp_controller", {"dist_init_addr": "a:1"}))
        return "launched"

    monkeypatch.setattr(runtime_context, "get_context", lambda: types.SimpleNamespace(server_args=published))
    assert ray_backend.launch_on_unpublished_copy(launch, object, published, "port_args") == "launched"
    assert seen[0] is not published
    assert published._resolved_overrides == [("earlier", {"x": 1})]  # the published record is untouched
    other = Args()
    ray_backend.launch_on_unpublished_copy(launch, object, other)
    assert seen[1] is other  # not the published one: passed through as is


@pytest.mark.server
def test_use_ray_without_gpus_fails_at_once_with_a_message(monkeypatch) -> None:
    import torch

    from sglang_fair.testing.server import LocalServer, ServerStartError

    if torch.cuda.is_available():
        pytest.skip("this machine has GPUs: a local Ray cluster would find them")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)  # ray.init starts a local cluster: no GPUs here
    server = LocalServer(extra_args=["--use-ray", "--dp", "2", "--load-balance-method", "d2lpm"],
                         skip_tokenizer_init=True, startup_timeout_s=120,
                         env={"RAY_AUTH_MODE": "disabled"})  # no token written to ~/.ray
    with pytest.raises(ServerStartError, match=r"needs 2 GPUs in the Ray cluster .* ray start --head --num-gpus 2"):
        server.start()
    server.stop()


def test_a_second_cpu_monitor_in_one_process_is_skipped() -> None:
    import prometheus_client

    registry = prometheus_client.CollectorRegistry()

    def start(component: str):
        prometheus_client.Counter("sglang:process_cpu_seconds_total", "cpu", ["component"], registry=registry)
        return component

    assert ray_backend.one_cpu_monitor_per_process(start, "data_parallel_controller") == "data_parallel_controller"
    assert ray_backend.one_cpu_monitor_per_process(start, "tokenizer") is None  # SGLang would crash here

    def broken(component: str):
        raise ValueError("something else")

    with pytest.raises(ValueError, match="something else"):
        ray_backend.one_cpu_monitor_per_process(broken, "tokenizer")


def _fake_ray(runtime_env: dict, gpus: float = 8, nodes: list[float] | None = None):
    """``nodes``: each alive node's GPUs (default: one node with ``gpus``)."""
    node_gpus = [gpus] if nodes is None else nodes
    return types.SimpleNamespace(
        is_initialized=lambda: True,
        get_runtime_context=lambda: types.SimpleNamespace(runtime_env=runtime_env),
        util=types.SimpleNamespace(get_current_placement_group=lambda: None),
        cluster_resources=lambda: {"GPU": sum(node_gpus)},
        nodes=lambda: [{"Alive": True, "Resources": {"GPU": g, "CPU": 4}} for g in node_gpus]
        + [{"Alive": False, "Resources": {"GPU": 8}}],  # a dead node counts for nothing
        shutdown=lambda: None,
    )


def test_a_placement_no_node_layout_can_hold_is_refused_naming_nnodes(monkeypatch) -> None:
    problem = ray_backend.placement_problem([4, 4], needed=8, nnodes=1)
    assert problem and "1 bundle(s) of 8 GPUs" in problem and "4, 4 GPUs" in problem
    assert "pass --nnodes 2" in problem
    assert ray_backend.placement_problem([4, 4], needed=8, nnodes=2) is None
    assert ray_backend.placement_problem([8], needed=8, nnodes=1) is None
    assert ray_backend.placement_problem([8, 2], needed=8, nnodes=2) is None  # two bundles of 4 on the 8-GPU node
    assert ray_backend.placement_problem([3, 3, 2], needed=8, nnodes=2) is not None  # 4-GPU bundles fit nowhere
    # Through the hook: two 4-GPU nodes, --dp 8 without --nnodes: an error at start, not a wait in pg.ready().
    import sys

    parallel = _parallel(dp=8)
    parallel.load_balance_method, parallel.nnodes = "round_robin", 1
    monkeypatch.setattr(runtime_context, "get_parallel", lambda: parallel)
    monkeypatch.delenv(WORKER_ENV, raising=False)
    monkeypatch.delenv(ROUTER_ENV, raising=False)
    monkeypatch.setitem(sys.modules, "ray", _fake_ray({"worker_process_setup_hook": ray_backend.SETUP_HOOK},
                                                      nodes=[4, 4]))
    with pytest.raises(RuntimeError, match="--nnodes 2"):
        ray_backend.join_ray(object, None)
    parallel.nnodes = 2
    ray_backend.join_ray(object, None)


def test_a_router_on_loopback_is_refused_on_a_cluster_of_several_nodes(monkeypatch) -> None:
    import sys

    parallel = _parallel(dp=2)
    parallel.load_balance_method, parallel.nnodes = "d2lpm_global", 2
    monkeypatch.setattr(runtime_context, "get_parallel", lambda: parallel)
    monkeypatch.delenv(settings.HOST_ENV, raising=False)
    monkeypatch.setitem(sys.modules, "ray", _fake_ray({"worker_process_setup_hook": ray_backend.SETUP_HOOK},
                                                      nodes=[1, 1]))
    with pytest.raises(RuntimeError, match=r"2 nodes.*127\.0\.0\.1.*SGLANG_FAIR_ROUTER_HOST"):
        ray_backend.join_ray(object, None)
    monkeypatch.setenv(settings.HOST_ENV, "10.0.0.5")
    ray_backend.join_ray(object, None)  # an address the other nodes reach: fine
    monkeypatch.delenv(settings.HOST_ENV)
    monkeypatch.setitem(sys.modules, "ray", _fake_ray({"worker_process_setup_hook": ray_backend.SETUP_HOOK},
                                                      nodes=[2]))
    parallel.nnodes = 1
    ray_backend.join_ray(object, None)  # one node: loopback reaches every actor


def test_a_ray_started_elsewhere_must_carry_the_worker_setup(monkeypatch, caplog) -> None:
    import sys

    parallel = _parallel(dp=2)
    parallel.load_balance_method = "d2lpm"
    monkeypatch.setattr(runtime_context, "get_parallel", lambda: parallel)
    monkeypatch.setitem(sys.modules, "ray", _fake_ray({}))
    with pytest.raises(RuntimeError, match="worker_runtime_env"):
        ray_backend.join_ray(object, None)  # a fair router, actors without the plugin: refused
    parallel.load_balance_method = "round_robin"
    monkeypatch.delenv(WORKER_ENV, raising=False)
    monkeypatch.delenv(ROUTER_ENV, raising=False)
    ray_backend.join_ray(object, None)  # nothing of ours configured: a warning only
    assert "started without sglang-fair's worker setup" in caplog.text
    monkeypatch.setitem(sys.modules, "ray", _fake_ray({"worker_process_setup_hook": ray_backend.SETUP_HOOK}, gpus=1))
    with pytest.raises(RuntimeError, match="needs 2 GPUs"):
        ray_backend.join_ray(object, None)
