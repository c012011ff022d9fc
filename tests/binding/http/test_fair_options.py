"""Start-up options: SGLang's own parser with our policies and ``--fair-*`` options."""

from __future__ import annotations

import json
import os

import pytest

from sglang_fair.launch_server import build_argv

pytestmark = pytest.mark.engine


def _parse(argv):
    from sglang.srt.server_args import prepare_server_args

    return prepare_server_args(["--model-path", "dummy", *argv])


def test_stock_parser_accepts_our_policy_and_exports_options(sglang_runtime, monkeypatch):
    monkeypatch.delenv("SGLANG_FAIR_CONFIG", raising=False)
    args = _parse(["--schedule-policy", "dlpm", "--fair-quantum", "512", "--fair-client-weights", "gold=2"])
    assert args.schedule_policy == "dlpm"
    exported = json.loads(os.environ["SGLANG_FAIR_CONFIG"])
    assert exported["quantum"] == 512 and exported["client_weights"] == {"gold": 2.0}


@pytest.mark.parametrize(
    "argv, option",
    [
        (["--fair-quantum", "0"], "--fair-quantum"),
        (["--fair-quantum", "-5"], "--fair-quantum"),
        (["--fair-input-weight", "-1"], "--fair-input-weight"),
        (["--fair-client-weights", "alice=0"], "--fair-client-weights"),
        (["--fair-client-weights", "alice"], "--fair-client-weights"),
        (["--fair-cost", "nonsense"], "--fair-cost"),
        (["--fair-idle-timeout", "0"], "--fair-idle-timeout"),
        (["--fair-isolation", "--fair-max-preemptions", "0"], "--fair-max-preemptions"),
    ],
)
def test_bad_options_are_refused_naming_the_option(sglang_runtime, argv, option):
    with pytest.raises(SystemExit) as exc:
        _parse(["--schedule-policy", "dlpm", *argv])
    assert option in str(exc.value)


def test_isolation_is_exported_and_refused_with_a_stock_policy(sglang_runtime, monkeypatch):
    monkeypatch.delenv("SGLANG_FAIR_CONFIG", raising=False)
    _parse(["--schedule-policy", "vtc", "--fair-isolation", "--fair-max-preemptions", "3"])
    exported = json.loads(os.environ["SGLANG_FAIR_CONFIG"])
    assert (exported["isolation"], exported["max_preemptions"]) == (True, 3)
    with pytest.raises(SystemExit) as exc:
        _parse(["--schedule-policy", "lpm", "--fair-isolation"])
    assert "--fair-isolation works with the policies of sglang-fair" in str(exc.value)


@pytest.mark.parametrize("argv, isolated", [
    (["--schedule-policy", "dlpm", "--dp-size", "2", "--load-balance-method", "d2lpm_global"], True),
    (["--schedule-policy", "dlpm", "--dp-size", "2", "--load-balance-method", "d2lpm_global",
      "--no-fair-isolation"], False),
    (["--schedule-policy", "dlpm", "--dp-size", "2", "--load-balance-method", "d2lpm"], False),  # the paper's
    (["--schedule-policy", "dlpm"], False),  # one worker: DLPM as the paper states it
    (["--schedule-policy", "vtc", "--dp-size", "2", "--load-balance-method", "d2lpm_global"], False),
    (["--schedule-policy", "dlpm", "--fair-isolation"], True),
])
def test_isolation_defaults_to_on_for_dlpm_behind_the_cluster_wide_router(sglang_runtime, monkeypatch, argv,
                                                                            isolated):
    monkeypatch.delenv("SGLANG_FAIR_CONFIG", raising=False)
    _parse(argv)
    assert json.loads(os.environ["SGLANG_FAIR_CONFIG"])["isolation"] is isolated


UNFAIR_MODES = [(["--disaggregation-mode", "decode"], "--disaggregation-mode", "_get_new_prebuilt_batch"),
                (["--disaggregation-mode", "prefill"], "--disaggregation-mode", "prebuilt-batch"),
                (["--enable-pdmux"], "--enable-pdmux", "separate streams"),
                (["--speculative-algorithm", "NGRAM"], "--speculative-algorithm", "--max-running-requests"),
                (["--pp-size", "2"], "--pp-size", "pipeline parallelism")]


@pytest.mark.parametrize("mode, option, why", UNFAIR_MODES)
def test_a_mode_sglang_fair_does_not_make_fair_is_refused_at_start(sglang_runtime, mode, option, why):
    for ours in (["--schedule-policy", "dlpm"], ["--schedule-policy", "lpm", "--dp-size", "2",
                                                  "--load-balance-method", "d2lpm_global"]):
        with pytest.raises(SystemExit) as exc:
            _parse([*ours, *mode])
        assert f"{option} cannot be combined with" in str(exc.value) and why in str(exc.value), exc.value
    # The launcher refuses it too, before SGLang's imports.
    from sglang_fair.launch_server import check_fair_arguments

    with pytest.raises(SystemExit) as exc:
        check_fair_arguments(["--schedule-policy", "dlpm", *mode])
    assert f"{option} cannot be combined with --schedule-policy dlpm" in str(exc.value)


def test_those_modes_stay_sglangs_own_business_without_our_policies_or_routers(sglang_runtime, monkeypatch):
    from sglang_fair.binding.http.fair_options import refuse_unfair_modes

    for mode, _, _ in UNFAIR_MODES:
        args = _namespace(mode)
        refuse_unfair_modes(args, "lpm", "round_robin")  # nothing of ours runs: no refusal
        with pytest.raises(ValueError):
            refuse_unfair_modes(args, "vtc", None)


def _namespace(argv: list[str]):
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--disaggregation-mode", default="null")
    parser.add_argument("--enable-pdmux", action="store_true")
    parser.add_argument("--speculative-algorithm")
    parser.add_argument("--pp-size", type=int, default=1)
    return parser.parse_args(argv)


def test_unknown_policy_is_refused(sglang_runtime, capsys):
    with pytest.raises(SystemExit):
        build_argv(["--policy", "fastest"])
    assert "--policy: unknown policy 'fastest'" in capsys.readouterr().err


def test_launcher_maps_policy_and_passes_everything_else(sglang_runtime):
    argv = build_argv(["--policy", "vtc", "--model-path", "m", "--fair-quantum", "9"])
    assert argv == ["--schedule-policy", "vtc", "--model-path", "m", "--fair-quantum", "9"]
    assert build_argv(["--model-path", "m"])[:2] == ["--schedule-policy", "dlpm"]


def test_launcher_defaults_dlpm_to_the_global_router_and_keeps_d2lpm_selectable(sglang_runtime):
    assert build_argv(["--dp", "2"])[-2:] == ["--load-balance-method", "d2lpm_global"]
    assert build_argv(["--policy", "dlpm", "--dp=4"])[-2:] == ["--load-balance-method", "d2lpm_global"]
    assert build_argv(["--dp", "2", "--load-balance-method", "d2lpm"]).count("--load-balance-method") == 1
    assert "--load-balance-method" not in build_argv(["--policy", "vtc", "--dp", "2"])
    assert "--load-balance-method" not in build_argv(["--policy", "dlpm"])


@pytest.mark.parametrize("content, message", [
    (None, "cannot read"),  # the file does not exist
    ("fairsrve:\n  alpha: 2\n", "unknown sections ['fairsrve']"),
    ("justitia:\n  histroy: x\n", "unknown keys in 'justitia'"),
    ("fairserve:\n  alpha: -1\n", "alpha must be a finite number"),
])
def test_policy_config_is_checked_whatever_the_policy(sglang_runtime, tmp_path, content, message):
    path = tmp_path / "policies.yaml"
    if content is not None:
        path.write_text(content)
    with pytest.raises(SystemExit) as exc:
        _parse(["--schedule-policy", "dlpm", "--fair-policy-config", str(path)])
    assert message in str(exc.value) and str(path) in str(exc.value)
