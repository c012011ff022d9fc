"""The real SGLang server on CPU, launched by LocalServer with the tiny model."""

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
from pathlib import Path

import pytest

from sglang_fair.binding.common.settings import PORT_RANGE_ENV
from sglang_fair.testing.server import (
    STOP_ENV,
    LocalServer,
    PortTakenError,
    ServerStartError,
    parallel_world_size,
    pick_free_port,
    process_group_alive,
    side_by_side,
)
from sglang_fair.tiny_cpu import TinyLlamaSpec

VOCAB = TinyLlamaSpec().vocab_size
FIRST_PLAIN_ID = 3  # ids 0-2 are <s>, </s>, <pad>


def _generate(server: LocalServer, input_ids: list[int], max_new_tokens: int = 8) -> dict:
    body = {
        "input_ids": input_ids,
        # ignore_eos: random weights may sample </s> at any step.
        "sampling_params": {"max_new_tokens": max_new_tokens, "temperature": 0.0, "ignore_eos": True},
    }
    return server.post_json("/generate", body)


def _prompt(seed: int, length: int) -> list[int]:
    """Distinct deterministic prompts per seed, so tests do not share cached prefixes."""
    return [FIRST_PLAIN_ID + (seed * 7919 + i * 31) % (VOCAB - FIRST_PLAIN_ID) for i in range(length)]


@pytest.fixture
def server(lpm_server):
    return lpm_server  # SGLang's own launcher, shared (tests/conftest.py)


@pytest.mark.server
def test_generate_with_input_ids_returns_requested_tokens(server):
    prompt = _prompt(seed=1, length=40)
    reply = _generate(server, prompt, max_new_tokens=8)
    assert len(reply["output_ids"]) == 8
    assert all(0 <= token < VOCAB for token in reply["output_ids"])
    meta = reply["meta_info"]
    assert meta["prompt_tokens"] == len(prompt)
    assert meta["completion_tokens"] == 8
    assert meta["finish_reason"]["type"] == "length"


@pytest.mark.server
def test_the_server_imported_no_model_module_but_the_tiny_models(server):
    # SGLang logs each model module it could not import while registering them all (tiny_cpu.CPU_ENV).
    assert "Load weight end" in server.log_tail(200_000)
    assert "Ignore import error when loading sglang.srt.models" not in server.log_tail(200_000)


@pytest.mark.server
def test_greedy_output_is_deterministic(server):
    prompt = _prompt(seed=2, length=24)
    first = _generate(server, prompt)["output_ids"]
    second = _generate(server, prompt)["output_ids"]
    assert first == second


@pytest.mark.server
def test_repeated_prefix_is_served_from_radix_cache(server):
    prefix = _prompt(seed=3, length=64)
    first = _generate(server, prefix + _prompt(seed=4, length=4), max_new_tokens=2)
    second = _generate(server, prefix + _prompt(seed=5, length=4), max_new_tokens=2)
    assert first["meta_info"]["cached_tokens"] < len(prefix)
    assert second["meta_info"]["cached_tokens"] >= len(prefix)


@pytest.mark.server
def test_text_prompt_uses_local_byte_tokenizer(server):
    text = "fair scheduling"
    reply = server.post_json(
        "/generate",
        {"text": text, "sampling_params": {"max_new_tokens": 4, "temperature": 0.0, "ignore_eos": True}},
    )
    assert reply["meta_info"]["prompt_tokens"] == len(text.encode())  # one token per byte
    assert reply["meta_info"]["completion_tokens"] == 4
    assert isinstance(reply["text"], str)


@pytest.mark.server
def test_invalid_request_gets_an_error_and_server_survives(server):
    with pytest.raises(urllib.error.HTTPError) as error:
        server.post_json("/generate", {"input_ids": [5, 6], "sampling_params": {"max_new_tokens": -1}})
    assert error.value.code == 400
    assert len(_generate(server, _prompt(seed=6, length=8), max_new_tokens=2)["output_ids"]) == 2


@pytest.mark.server
def test_a_picked_port_taken_is_picked_again_and_sigterm_leaves_no_process(tiny_model_dir, monkeypatch):
    # Our launcher refuses a taken port before SGLang starts; the harness must launch again on a new
    # port at once (the uvicorn message of SGLang's own launcher, which hangs: the tests below).
    # The server that started is then shut down by SIGTERM, as a supervisor would.
    from sglang_fair.testing import server as server_module

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        picks = iter([busy])
        real_pick = server_module.pick_free_port
        monkeypatch.setattr(server_module, "pick_free_port", lambda host: next(picks, None) or real_pick(host))
        with LocalServer(model_path=tiny_model_dir, module="sglang_fair.launch_server", max_total_tokens=2048,
                         startup_timeout_s=600) as running:
            assert running.port != busy
            assert _generate(running, _prompt(9, 8), max_new_tokens=2)["meta_info"]["completion_tokens"] == 2
            _sigterm_leaves_no_process(running)


def test_uvicorn_says_address_already_in_use_for_a_taken_port():
    # What SGLang's HTTP server (uvicorn) logs before it hangs: the text LocalServer watches for.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        code = ("import uvicorn\nasync def app(scope, receive, send): pass\n"
                f"uvicorn.run(app, host='127.0.0.1', port={busy}, log_level='info')")
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "address already in use" in (run.stdout + run.stderr).lower(), run.stdout + run.stderr


def _sigterm_leaves_no_process(server: LocalServer) -> None:
    pgid = server.pid  # the server leads its own process group
    assert process_group_alive(pgid)
    os.kill(pgid, signal.SIGTERM)
    # SGLang's own handler must stop every process; LocalServer.stop() would SIGKILL leftovers.
    deadline = time.monotonic() + 30
    while (server.poll() is None or process_group_alive(pgid)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert server.poll() is not None, "server still running 30 s after SIGTERM"
    assert not process_group_alive(pgid), "a server child process outlived SIGTERM"


def test_a_given_port_that_is_taken_fails_at_once_without_another_try(tiny_model_dir):
    # A stand-in that finds its port taken as SGLang does (the real server's bind error is the
    # picked-port test's above): a port the caller chose is not replaced by another.
    root = Path(__file__).resolve().parents[2]
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        server = LocalServer(model_path=tiny_model_dir, module="tests.support.bind_stand_in", port=busy,
                             startup_timeout_s=120, cwd=str(root), env={"PYTHONPATH": str(root)})
        with pytest.raises(PortTakenError, match="could not bind a port") as error:
            server.start()
    assert "error while attempting to bind" in str(error.value)  # the log tail, once
    assert server.pid is None and server.port == busy


def test_server_that_cannot_start_reports_its_log(tiny_model_dir):
    # A module that does not exist fails the way a broken server does, in
    # well under a second instead of SGLang's import time.
    failing = LocalServer(model_path=tiny_model_dir, module="sglang_fair.no_such_server")
    with pytest.raises(ServerStartError) as error:
        failing.start()
    assert "exited with code 1" in str(error.value)
    assert "No module named sglang_fair.no_such_server" in str(error.value)  # the log tail
    assert failing.pid is None


def test_a_server_given_cores_runs_on_them_alone(tiny_model_dir):
    root = Path(__file__).resolve().parents[2]
    core = sorted(os.sched_getaffinity(0))[-1]
    with LocalServer(model_path=tiny_model_dir, module="tests.support.health_stand_in", cpus=[core],
                     cwd=str(root), env={"PYTHONPATH": str(root)}) as server:
        assert os.sched_getaffinity(server.pid) == {core}


def test_side_by_side_stops_the_others_when_one_fails_and_every_one_on_the_way_out(tiny_model_dir):
    root = Path(__file__).resolve().parents[2]
    started: list[int] = []  # process groups of the servers that came up

    class StandIn(LocalServer):
        def start(self) -> LocalServer:
            super().start()
            started.append(self.pid)
            return self

    def stand_in(module: str = "tests.support.health_stand_in") -> LocalServer:
        return StandIn(model_path=tiny_model_dir, module=module, cwd=str(root), env={"PYTHONPATH": str(root)})

    with pytest.raises(ServerStartError):
        with side_by_side([stand_in(), stand_in("tests.support.no_such_module")]):
            pytest.fail("entered although a server did not start")
    assert len(started) == 1 and not process_group_alive(started[0])
    first, second = stand_in(), stand_in()
    with side_by_side([first, second]) as servers:
        assert servers == [first, second] and all(process_group_alive(pid) for pid in started[1:])
        first.stop()  # one stopped early: the way out stops the other
    assert len(started) == 3 and not any(process_group_alive(pid) for pid in started)


# Unit tests of the launch helpers: no server.


@pytest.mark.parametrize("graceful, env, args, code", [
    (True, "kill", [], -signal.SIGTERM),  # asked for
    (None, "kill", [], -signal.SIGKILL),  # the suite's default
    (None, "kill", ["--use-ray"], -signal.SIGTERM),  # Ray's actors are not in the group: always graceful
    (None, "", [], -signal.SIGTERM),  # a user's default
])
def test_stop_drains_or_kills_as_asked(tmp_path, monkeypatch, graceful, env, args, code):
    # A stand-in with no child: SIGTERM's default action ends it with -15, a kill with -9.
    monkeypatch.setenv(STOP_ENV, env)
    server = LocalServer(log_path=str(tmp_path / "server.log"), extra_args=args)
    server._log_file = open(server.log_path, "wb")
    server._proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    assert server.stop(graceful=graceful) == code
    assert server.stop() is None  # stopped once


def test_parallel_world_size_reads_dp_and_tp_flags():
    assert parallel_world_size(["--schedule-policy", "lpm"]) == 1
    assert parallel_world_size(["--dp", "2"]) == 2
    assert parallel_world_size(["--data-parallel-size=2", "--tp-size", "2"]) == 4
    with pytest.raises(ValueError, match="--dp needs an integer"):
        parallel_world_size(["--dp"])


def test_pick_free_port_keeps_to_the_configured_range(monkeypatch):
    monkeypatch.setenv(PORT_RANGE_ENV, "31090-31099")
    assert 31090 <= pick_free_port() <= 31099
    for spec in ("31090", "31099-31090", "0-10"):
        monkeypatch.setenv(PORT_RANGE_ENV, spec)
        with pytest.raises(ValueError, match=PORT_RANGE_ENV):
            pick_free_port()


def test_command_carries_cpu_flags_and_pass_through_args(tiny_model_dir):
    server = LocalServer(
        model_path=tiny_model_dir, port=31098, module="sglang_fair.launch_server", extra_args=["--policy", "dlpm"]
    )
    command = server.command()
    assert command[1:3] == ["-m", "sglang_fair.launch_server"]
    for flag in ("--device", "--attention-backend", "--load-format", "--max-total-tokens", "--sleep-on-idle"):
        assert flag in command
    assert command[-2:] == ["--policy", "dlpm"]
    assert command[command.index("--port") + 1] == "31098"
