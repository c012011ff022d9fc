"""The router's command line and launch-time checks (launcher side), without a server."""

from __future__ import annotations

import argparse
import json
import os

import pytest

pytestmark = pytest.mark.engine

pytest.importorskip("sglang.srt.managers.data_parallel_controller")

from sglang.srt.managers.data_parallel_controller import LoadBalanceMethod  # noqa: E402

from sglang_fair.binding.common import router_channels, settings  # noqa: E402
from sglang_fair.binding.controller.router_binding import resolve_method  # noqa: E402
from sglang_fair.binding.http import router_options, server_info  # noqa: E402
from sglang_fair.binding.common.settings import RouterSettings  # noqa: E402
from sglang_fair.ports import PICK_LOW, ephemeral_low  # noqa: E402


def test_cli_accepts_the_new_methods_and_options() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--load-balance-method", choices=["auto", "round_robin"], default="auto")
    router_options.extend_cli(None, parser)
    router_options.extend_cli(None, parser)  # twice (several processes parse): no duplicate options
    args = parser.parse_args(["--load-balance-method", "d2lpm", "--fair-router-quantum", "500"])
    assert args.load_balance_method == "d2lpm" and args.fair_router_quantum == 500.0
    with pytest.raises(SystemExit):
        parser.parse_args(["--load-balance-method", "nope"])


def _namespace(**kw) -> argparse.Namespace:
    base = {"load_balance_method": "d2lpm", "dp_size": 2, "kv_events_config": None,
            "fair_router_quantum": None, "fair_router_options": None}
    base.update(kw)
    return argparse.Namespace(**base)


def test_prepare_validates_exports_and_turns_on_kv_events(monkeypatch) -> None:
    monkeypatch.setenv(settings.KV_PORT_ENV, "33095")
    monkeypatch.delenv(settings.ROUTER_ENV, raising=False)
    args = _namespace(fair_router_quantum=4096.0, fair_router_options='{"index_capacity_tokens": 1000}')
    router_options.prepare_router_args(None, args)
    config = json.loads(os.environ[settings.ROUTER_ENV])
    assert config == {"method": "d2lpm", "kv_port": 33095, "options": {
        "index_capacity_tokens": 1000, "quantum": 4096.0, "input_weight": 1.0, "output_weight": 2.0}}
    kv = json.loads(args.kv_events_config)
    assert kv["endpoint"] == "tcp://127.0.0.1:33095" and kv["bind"] is False


def test_the_router_charges_with_the_workers_weights(monkeypatch) -> None:
    monkeypatch.setenv(settings.KV_PORT_ENV, "33095")
    for method in ("d2lpm", "d2lpm_global"):
        router_options.prepare_router_args(None, _namespace(load_balance_method=method, fair_output_weight=4.0,
                                                        fair_input_weight=0.5))
        options = json.loads(os.environ[settings.ROUTER_ENV])["options"]
        assert (options["input_weight"], options["output_weight"]) == (0.5, 4.0)
    # Routers that charge nothing take no weights.
    router_options.prepare_router_args(None, _namespace(load_balance_method="preble", fair_output_weight=4.0))
    assert "output_weight" not in json.loads(os.environ[settings.ROUTER_ENV])["options"]
    with pytest.raises(SystemExit, match="output_weight=3.0 contradicts --fair-output-weight 4.0"):
        router_options.prepare_router_args(None, _namespace(fair_output_weight=4.0,
                                                        fair_router_options='{"output_weight": 3.0}'))


def test_the_cluster_wide_dlpm_weighs_clients_as_the_workers_do(monkeypatch) -> None:
    monkeypatch.setenv(settings.KV_PORT_ENV, "33095")
    router_options.prepare_router_args(None, _namespace(load_balance_method="d2lpm_global",
                                                    fair_client_weights="alice=2,bob=0.5"))
    assert json.loads(os.environ[settings.ROUTER_ENV])["options"]["client_weights"] == {"alice": 2.0, "bob": 0.5}
    # Algorithm 2's per-(client, worker) deficits take no weights; neither do routers that charge nothing.
    for method in ("d2lpm", "preble"):
        router_options.prepare_router_args(None, _namespace(load_balance_method=method, fair_client_weights="alice=2"))
        assert "client_weights" not in json.loads(os.environ[settings.ROUTER_ENV])["options"]


def test_prepare_follows_user_kv_events(monkeypatch) -> None:
    monkeypatch.delenv(settings.ROUTER_ENV, raising=False)
    user = '{"publisher": "zmq", "endpoint": "tcp://*:5557"}'
    args = _namespace(kv_events_config=user)
    router_options.prepare_router_args(None, args)
    assert args.kv_events_config == user
    assert "kv_port" not in json.loads(os.environ[settings.ROUTER_ENV])


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"fair_router_quantum": 0.0}, "Q\\^w"),
        ({"fair_router_options": "{bad json"}, "not valid JSON"),
        ({"fair_router_options": '{"colour": 1}'}, "does not take option"),
        ({"fair_router_options": "[1]"}, "JSON object"),
    ],
)
def test_prepare_refuses_bad_options(kw, message, monkeypatch) -> None:
    monkeypatch.setenv(settings.KV_PORT_ENV, "33095")
    with pytest.raises(SystemExit, match=message):
        router_options.prepare_router_args(None, _namespace(**kw))


def test_stock_methods_are_left_alone(monkeypatch) -> None:
    monkeypatch.delenv(settings.ROUTER_ENV, raising=False)
    args = _namespace(load_balance_method="round_robin")
    router_options.prepare_router_args(None, args)
    assert args.kv_events_config is None and settings.ROUTER_ENV not in os.environ
    assert resolve_method(LoadBalanceMethod.from_str.__func__, LoadBalanceMethod, "d2lpm") is LoadBalanceMethod.ROUND_ROBIN
    with pytest.raises(ValueError, match="Invalid load balance method"):
        resolve_method(LoadBalanceMethod.from_str.__func__, LoadBalanceMethod, "nope")


def test_feedback_endpoint_is_local_ipc_unless_a_router_host_is_set(monkeypatch) -> None:
    monkeypatch.delenv(settings.HOST_ENV, raising=False)
    assert router_channels.feedback_endpoint().startswith("ipc://")
    monkeypatch.setenv(settings.HOST_ENV, "127.0.0.2")
    endpoint = router_channels.feedback_endpoint()
    host, _, port = endpoint.removeprefix("tcp://").rpartition(":")
    assert host == "127.0.0.2" and PICK_LOW <= int(port) < min(22000, ephemeral_low())  # sglang_fair.ports


def test_prepare_points_kv_publishers_at_the_router_host(monkeypatch) -> None:
    monkeypatch.setenv(settings.HOST_ENV, "127.0.0.2")
    monkeypatch.setenv(settings.KV_PORT_ENV, "33095")
    monkeypatch.delenv(settings.ROUTER_ENV, raising=False)
    args = _namespace()
    router_options.prepare_router_args(None, args)
    assert json.loads(args.kv_events_config)["endpoint"] == "tcp://127.0.0.2:33095"


def test_reserved_feedback_endpoint_is_exported_once(monkeypatch) -> None:
    monkeypatch.delenv(settings.ROUTER_ENV, raising=False)
    assert router_channels.reserve_feedback_endpoint() is None  # no fair router configured
    monkeypatch.setenv(settings.KV_PORT_ENV, "33095")
    router_options.prepare_router_args(None, _namespace())
    first = router_channels.reserve_feedback_endpoint()
    assert first and router_channels.reserve_feedback_endpoint() == first
    assert RouterSettings.load("d2lpm").feedback == first
    assert RouterSettings.load("preble") == RouterSettings("preble")  # another method: defaults


def test_reserving_the_endpoint_tells_workers_whether_to_report_admissions(monkeypatch) -> None:

    monkeypatch.delenv(settings.ROUTER_ENV, raising=False)
    router_channels.reserve_feedback_endpoint("d2lpm_global")  # Ray actors' environment is fixed here
    assert os.environ[settings.LATE_BINDING_ENV] == "1"
    monkeypatch.delenv(settings.ROUTER_ENV)
    router_channels.reserve_feedback_endpoint("d2lpm")
    assert settings.LATE_BINDING_ENV not in os.environ


def test_server_info_names_the_router_and_its_options(monkeypatch) -> None:
    monkeypatch.setenv(settings.KV_PORT_ENV, "33095")
    monkeypatch.delenv(settings.ROUTER_ENV, raising=False)
    router_options.prepare_router_args(None, _namespace(load_balance_method="d2lpm_global",
                                                    fair_router_options='{"local_queue_requests": 2}'))
    info = server_info.describe_router({}, _namespace(load_balance_method="d2lpm_global"))
    assert info["fair_router"] == {"method": "d2lpm_global", "options": {
        "local_queue_requests": 2, "input_weight": 1.0, "output_weight": 2.0}}
    assert "fair_router" not in server_info.describe_router({}, _namespace(load_balance_method="round_robin"))
    assert "fair_router" not in server_info.describe_router({}, _namespace(dp_size=1))


def test_every_launcher_option_with_a_router_counterpart_reaches_the_worker_settings() -> None:
    import dataclasses

    from sglang.srt.server_args import ServerArgs

    from sglang_fair.binding.http.fair_options import add_fair_arguments
    from sglang_fair.router import WorkerSettings

    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    if not any("--fair-quantum" in a.option_strings for a in parser._actions):  # the plugin's hook adds them
        add_fair_arguments(parser)
    args = parser.parse_args([
        "--model-path", "m", "--fair-input-weight", "0.5", "--fair-output-weight", "3", "--fair-quantum", "99",
        "--fair-client-weights", "alice=2", "--fair-isolation", "--max-running-requests", "7",
        "--enable-mixed-chunk", "--chunked-prefill-size", "333", "--max-total-tokens", "12345",
        "--max-prefill-tokens", "4321", "--fair-idle-timeout", "77"])
    given = router_options.worker_settings(args)
    defaults = WorkerSettings()
    unset = [f.name for f in dataclasses.fields(WorkerSettings) if getattr(given, f.name) == getattr(defaults, f.name)]
    assert not unset, f"launcher options that never reach a router: {unset}"
    assert (given.mixed_chunk_tokens, given.kv_pool_tokens, given.idle_timeout_s) == (333, 12345, 77.0)
