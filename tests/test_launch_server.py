"""The launcher: --policy (and SGLang's --schedule-policy as an alias), --tiny-cpu, the d2lpm_global default."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from sglang_fair.launch_server import build_argv, check_port_free
from sglang_fair.tiny_cpu import TINY_CPU_MAX_TOTAL_TOKENS, ensure_tiny_model

pytestmark = pytest.mark.engine  # the launcher reads SGLang's own policy names


def _option(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_schedule_policy_is_an_alias_of_policy():
    assert build_argv(["--schedule-policy", "vtc", "--port", "1"]) == ["--schedule-policy", "vtc", "--port", "1"]
    assert build_argv(["--schedule-policy=lpm"])[:2] == ["--schedule-policy", "lpm"]
    assert build_argv(["--policy", "vtc", "--schedule-policy", "vtc"]) == ["--schedule-policy", "vtc"]
    assert build_argv([])[:2] == ["--schedule-policy", "dlpm"]


def test_disagreeing_policy_and_schedule_policy_are_refused(capsys):
    with pytest.raises(SystemExit):
        build_argv(["--policy", "vtc", "--schedule-policy", "lpm"])
    assert "--policy vtc and --schedule-policy lpm disagree" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        build_argv(["--schedule-policy", "bogus"])
    assert "unknown policy 'bogus'" in capsys.readouterr().err


def test_tiny_cpu_adds_the_model_and_cpu_flags():
    argv = build_argv(["--tiny-cpu", "--policy", "dlpm", "--port", "30000"])
    assert _option(argv, "--model-path") == str(ensure_tiny_model())
    assert (_option(argv, "--device"), _option(argv, "--attention-backend")) == ("cpu", "torch_native")
    assert _option(argv, "--load-format") == "dummy" and "--sleep-on-idle" in argv
    assert _option(argv, "--max-total-tokens") == str(TINY_CPU_MAX_TOTAL_TOKENS)
    assert "--tiny-cpu" not in argv  # ours, not SGLang's


def test_tiny_cpu_leaves_what_the_user_gave():
    argv = build_argv(["--tiny-cpu", "--model-path", "/m", "--max-total-tokens=4096", "--load-format", "auto"])
    assert argv.count("--model-path") == 1 and _option(argv, "--model-path") == "/m"
    assert "--max-total-tokens=4096" in argv and "--max-total-tokens" not in argv
    assert argv.count("--load-format") == 1 and _option(argv, "--load-format") == "auto"


def test_prefixes_of_sglang_options_are_not_taken_as_ours():
    # allow_abbrev is off: "--tiny" or "--pol" belong to SGLang (which refuses or takes them), never to us.
    assert "--tiny" in build_argv(["--tiny"])


def test_dlpm_with_dp_defaults_to_the_global_router():
    argv = build_argv(["--policy", "dlpm", "--dp", "4"])
    assert _option(argv, "--load-balance-method") == "d2lpm_global"
    assert "--load-balance-method" not in build_argv(["--policy", "vtc", "--dp", "4"])
    argv = build_argv(["--dp", "2", "--load-balance-method", "d2lpm"])
    assert argv.count("--load-balance-method") == 1


def test_a_taken_port_is_refused_before_anything_starts() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(SystemExit, match=f"port {port} on 127.0.0.1 is already in use"):
            check_port_free("127.0.0.1", port)
    check_port_free("127.0.0.1", port)  # free again: no exit


@pytest.mark.parametrize("args, named", [
    (["--fair-client-keys", "/nonexistent/keys.yaml"], "--fair-client-keys /nonexistent/keys.yaml: cannot read it"),
    (["--fair-quantum", "-3"], "--fair-quantum must be a positive"),
    (["--fair-quantum", "abc"], "argument --fair-quantum: invalid float value: 'abc'"),
    (["--fair-policy-config", "/nonexistent/policy.yaml"], "--fair-policy-config: cannot read /nonexistent/policy.yaml"),
    (["--fair-client-weights", "alice=x"], "--fair-client-weights"),
    (["--dp", "2", "--fair-router-options", "{bad"], "--load-balance-method d2lpm_global: --fair-router-options"),
    (["--dp", "2", "--fair-router-options", '{"no_such_option": 1}'], "no_such_option"),
    (["--dp", "2", "--fair-router-options", '{"lane_workers": 2}'], "lane_workers must leave at least one other worker"),
])
def test_bad_configuration_is_refused_before_sglang_is_imported(args, named):
    # SGLang's imports take tens of seconds on CPU; the launcher's own checks come first.
    probe = ("import sys, runpy; sys.argv = ['sglang_fair.launch_server', *sys.argv[1:]]\n"
             "try:\n    runpy.run_module('sglang_fair.launch_server', run_name='__main__')\n"
             "finally:\n    print('SGLANG_IMPORTED' if 'sglang.srt.server_args' in sys.modules else 'NO_SGLANG')\n")
    run = subprocess.run([sys.executable, "-c", probe, "--tiny-cpu", *args], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode != 0
    assert named in run.stderr, run.stderr
    assert run.stdout.strip() == "NO_SGLANG"


def test_bad_configuration_is_refused_before_the_engine_is_loaded():
    # Refused in seconds: the launcher's own checks come before SGLang's server and torch (tens of
    # seconds on CPU). Python's import log (-X importtime) says what the refused launch loaded.
    run = subprocess.run([sys.executable, "-X", "importtime", "-m", "sglang_fair.launch_server", "--tiny-cpu",
                          "--fair-client-keys", "/nonexistent/keys.yaml"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 1 and "--fair-client-keys" in run.stderr
    loaded = {line.rsplit("|", 1)[-1].strip() for line in run.stderr.splitlines() if line.startswith("import time:")}
    assert "sglang_fair.launch_server" in loaded or "sglang_fair" in loaded, run.stderr[-2000:]
    heavy = sorted(name for name in loaded if name.split(".")[0] == "torch" or name.startswith("sglang.srt"))
    assert not heavy, f"loaded before refusing: {heavy[:10]}"
