"""Launch the real SGLang server on CPU as a subprocess, for tests and demos.

`LocalServer` runs `python -m sglang.launch_server` (or any module taking the
same arguments, e.g. `sglang_fair.launch_server`) with the flags the CPU path
needs, serving the tiny random-weight model by default. It waits until the
server answers /health_generate, and always tears the whole process group
down (the HTTP server, its scheduler and detokenizer processes) on exit.

    with LocalServer(extra_args=["--schedule-policy", "lpm"]) as server:
        reply = server.post_json("/generate", {"input_ids": [5, 6, 7], ...})

Needs SGLang installed the CPU way (scripts/install_cpu.sh).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sglang_fair.binding.common import settings
from sglang_fair.binding.common.cpu_threads import BIND_ENV, bind_groups
from sglang_fair.ports import free_port_run, port_free
from sglang_fair.testing.quiet import busy_cores, wait_quiet
from sglang_fair.tiny_cpu import CPU_ENV, CPU_OPTIONS, ensure_tiny_model

# Flags every CPU launch needs: the launcher's --tiny-cpu set.
CPU_FLAGS = tuple(part for option in CPU_OPTIONS for part in option)
_PARALLEL_FLAGS = {
    "--dp": "dp",
    "--dp-size": "dp",
    "--data-parallel-size": "dp",
    "--tp": "tp",
    "--tp-size": "tp",
    "--tensor-parallel-size": "tp",
}


class ServerStartError(RuntimeError):
    """The server died or did not become healthy in time; the message carries its log tail."""


class PortTakenError(ServerStartError):
    """The server could not bind a port: something took it after it was picked."""


_PORT_TRIES = 3  # launches with a freshly picked port when the last one was taken
# uvicorn's and ZMQ's EADDRINUSE message ("address already in use"), and sglang_fair.launch_server's
# refusal of a taken port ("port P on H is already in use"), which it checks before SGLang starts.
_BIND_FAILED = b"already in use"
# A probe is retried until the deadline; short, because a port another process holds may take the
# connection and never answer, and the bind error is read from the log between probes.
_PROBE_TIMEOUT_S = 5.0
_SETTLE_TIMEOUT_S = 60.0  # after it, a server still busy is handed over as it is
# Set to "kill", stop() kills the process group at once instead of SIGTERM and SGLang's graceful
# shutdown, which waits up to 5 s for its watchdog. A test suite sets it for the servers whose
# shutdown no test examines (tests/conftest.py); a stop(graceful=True) is graceful regardless.
STOP_ENV = settings.TEST_SERVER_STOP_ENV


def pick_free_port(host: str = "127.0.0.1") -> int:
    """A free TCP port: the first free one in $SGLANG_FAIR_PORT_RANGE if set, else a random
    one below the ports the OS hands out (``sglang_fair.ports``)."""
    configured = settings.port_range()
    if configured is not None:
        low, high = configured
        for port in range(low, high + 1):
            if port_free(host, port):
                return port
        raise RuntimeError(f"no free port in {settings.PORT_RANGE_ENV}={low}-{high}")
    return free_port_run(host, 1)


def parallel_world_size(args: Sequence[str]) -> int:
    """dp x tp as given in `args` (1 if absent); SGLang spawns one process per rank."""
    sizes = {"dp": 1, "tp": 1}
    for i, arg in enumerate(args):
        name, eq, value = arg.partition("=")
        if name in _PARALLEL_FLAGS:
            raw = value if eq else (args[i + 1] if i + 1 < len(args) else "")
            try:
                sizes[_PARALLEL_FLAGS[name]] = int(raw)
            except ValueError:
                raise ValueError(f"{name} needs an integer, got {raw!r}") from None
    return sizes["dp"] * sizes["tp"]


@dataclass
class LocalServer:
    """One real SGLang server subprocess on CPU; use as a context manager."""

    model_path: str | os.PathLike | None = None  # None: the cached tiny model
    # "cpu": the tiny-CPU flags and environment; "cuda": SGLang's defaults for a GPU, dummy weights.
    device: str = "cpu"
    extra_args: Sequence[str] = ()  # passed through, e.g. ["--schedule-policy", "lpm", "--dp", "2"]
    module: str = "sglang.launch_server"  # or "sglang_fair.launch_server"
    max_total_tokens: int = 8192  # KV pool size; unset, SGLang sizes it from host RAM (GBs, slow)
    host: str = "127.0.0.1"
    port: int | None = None  # None: pick_free_port()
    skip_tokenizer_init: bool = False  # True: only input_ids requests work
    startup_timeout_s: float = 180.0
    shutdown_timeout_s: float = 30.0
    env: Mapping[str, str] = field(default_factory=dict)  # added to os.environ for the server
    cpus: Sequence[int] | None = None  # the cores the whole server may use (None: this process's)
    # None: a temporary file, deleted by stop() unless the server failed to
    # start, died on its own or hung on shutdown.
    log_path: str | os.PathLike | None = None
    python: str = sys.executable
    cwd: str | os.PathLike | None = None  # the server's working directory (None: this process's)
    startup_s: float | None = field(default=None, init=False)  # launch until healthy
    settle_s: float | None = field(default=None, init=False)  # then until its processes were quiet (quiet.py)
    _proc: subprocess.Popen | None = field(default=None, init=False, repr=False)
    _log_file: Any = field(default=None, init=False, repr=False)
    _temporary_log: bool = field(default=False, init=False, repr=False)

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise RuntimeError("server not started")
        return f"http://{self.host}:{self.port}"

    def url(self, path: str) -> str:
        return self.base_url + path

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def poll(self) -> int | None:
        """The server's exit code if it has exited, else None (also None if never started)."""
        return self._proc.poll() if self._proc else None

    def command(self) -> list[str]:
        """The full command line that start() runs."""
        if self.port is None:
            raise RuntimeError("port not chosen yet")
        args = [self.python, "-m", self.module, "--model-path", str(self.model_path)]
        args += [*(CPU_FLAGS if self.device == "cpu" else ("--load-format", "dummy")),
                 "--host", self.host, "--port", str(self.port)]
        args += ["--max-total-tokens", str(self.max_total_tokens)]
        if self.skip_tokenizer_init:
            args.append("--skip-tokenizer-init")
        return args + list(self.extra_args)

    def _server_env(self) -> dict[str, str]:
        env = dict(os.environ)
        if self.device != "cpu":  # a GPU launch needs none of the CPU engine's settings below
            return env | dict(self.env) | {"PYTHONUNBUFFERED": "1"}
        for key, value in CPU_ENV.items():  # a model package given is kept (empty: all of SGLang's)
            env.setdefault(key, value)
        env["SGLANG_USE_CPU_ENGINE"] = "1"
        env["PYTHONUNBUFFERED"] = "1"  # so the log tail is current when we report a failure
        ranks = parallel_world_size(self.extra_args)
        # sglang_fair.launch_server binds each rank's cores itself; SGLang's own launcher needs it given.
        if self.module != "sglang_fair.launch_server" and ranks > 1 and BIND_ENV not in env and BIND_ENV not in self.env:
            env[BIND_ENV] = bind_groups(ranks, sorted(self.cpus or os.sched_getaffinity(0)))
        env.update(self.env)
        return env

    def start(self) -> "LocalServer":
        """Launch and block until healthy; raise ServerStartError (with the log tail) if not.

        When the port was picked here and the server finds it taken (SGLang then
        hangs instead of exiting), it is stopped and launched again on a new port.
        """
        if self._proc is not None:
            raise RuntimeError("server already started")
        if self.max_total_tokens <= 0:
            raise ValueError(f"max_total_tokens must be positive, got {self.max_total_tokens}")
        if self.device not in ("cpu", "cuda"):
            raise ValueError(f"device must be 'cpu' or 'cuda', got {self.device!r}")
        if self.model_path is None:
            self.model_path = ensure_tiny_model()
        picked = self.port is None
        attempt = 1
        while True:
            if picked:
                self.port = pick_free_port(self.host)
            made_log = self.log_path is None
            try:
                return self._launch()
            except PortTakenError:
                if not picked or attempt == _PORT_TRIES:
                    raise
                if made_log:  # this attempt's log; the next gets one named after its port
                    Path(self.log_path).unlink(missing_ok=True)
                    self.log_path = None
                attempt += 1

    def _launch(self) -> "LocalServer":
        if self.log_path is None:
            fd, name = tempfile.mkstemp(prefix=f"sglang-server-{self.port}-", suffix=".log")
            os.close(fd)
            self.log_path = name
            self._temporary_log = True
        self._log_file = open(self.log_path, "wb")
        started = time.monotonic()
        # A new session makes the server the leader of its own process group,
        # so stop() reaches the scheduler and detokenizer children too.
        self._proc = subprocess.Popen(
            self.command(),
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            env=self._server_env(),
            start_new_session=True,
            cwd=self.cwd,
        )
        if self.cpus is not None:
            # Set from here, not in a preexec_fn (unsafe where threads start servers side by side): the
            # interpreter takes seconds to import before it starts a thread or a child, which inherit it.
            with contextlib.suppress(ProcessLookupError):  # exited at once: _wait_healthy says why
                os.sched_setaffinity(self._proc.pid, self.cpus)
        atexit.register(self._kill_group)
        try:
            self._wait_healthy(started + self.startup_timeout_s)
        except BaseException as error:
            self._temporary_log = False  # the error message points at the log: keep it
            if isinstance(error, PortTakenError):
                _signal_group(self._proc.pid, signal.SIGKILL)  # it would hang on shutdown too
            self.stop()
            raise
        self.startup_s = time.monotonic() - started
        pid = self._proc.pid
        wait_quiet(time.monotonic() + _SETTLE_TIMEOUT_S, lambda: busy_cores(pid))
        self.settle_s = time.monotonic() - started - self.startup_s
        return self

    def _wait_healthy(self, deadline: float) -> None:
        while True:
            code = self._proc.poll()  # read before the log: a server that exited has written all of it
            if _BIND_FAILED in _log_end(self.log_path):
                raise PortTakenError(f"server could not bind a port\n{self._tail_report()}")
            if code is not None:
                raise ServerStartError(f"server exited with code {code} before becoming healthy\n{self._tail_report()}")
            try:
                with urllib.request.urlopen(self.url("/health_generate"), timeout=_PROBE_TIMEOUT_S) as reply:
                    if reply.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass  # not listening yet, or 503 while warming up; or the port is another process's
            if time.monotonic() > deadline:
                raise ServerStartError(
                    f"server not healthy after {self.startup_timeout_s:.0f} s\n{self._tail_report()}"
                )
            time.sleep(0.5)

    def _tail_report(self) -> str:
        return f"command: {' '.join(self.command())}\nlog {self.log_path} (last lines):\n{self.log_tail()}"

    def log_tail(self, lines: int = 40) -> str:
        """The last `lines` lines of the server's combined stdout/stderr."""
        if self.log_path is None or not Path(self.log_path).exists():
            return ""
        text = Path(self.log_path).read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, graceful: bool | None = None) -> int | None:
        """Stop the server and its process group; return the exit code.

        Graceful: only the leader gets SIGTERM: SGLang's own handler drains requests and
        shuts its children down in order (this takes about 5 s, its watchdog's
        poll period). Whatever is left of the group afterwards is killed.
        ``graceful=False`` (the default where ``STOP_ENV`` is "kill", except under
        ``--use-ray``, whose actors live outside the group) kills the group at once.
        """
        if self._proc is None:
            return None
        if graceful is None:
            graceful = not settings.test_servers_killed() or "--use-ray" in self.extra_args
        pgid = self._proc.pid  # session leader: its pid is the group id
        if self._proc.poll() is not None:
            self._temporary_log = False  # it died on its own: keep the log for the post-mortem
        if graceful:
            self._proc.send_signal(signal.SIGTERM)
        else:
            _signal_group(pgid, signal.SIGKILL)
        try:
            self._proc.wait(timeout=self.shutdown_timeout_s)
        except subprocess.TimeoutExpired:
            self._temporary_log = False  # a hung shutdown is worth a look too
            _signal_group(pgid, signal.SIGKILL)
            self._proc.wait()
        # Children can outlive the leader for a moment; give them a short grace.
        deadline = time.monotonic() + 5.0
        while process_group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.1)
        _signal_group(pgid, signal.SIGKILL)
        code = self._proc.returncode
        atexit.unregister(self._kill_group)
        self._log_file.close()
        if self._temporary_log:
            Path(self.log_path).unlink(missing_ok=True)
            self.log_path = None
            self._temporary_log = False
        self._proc = None
        return code

    def _kill_group(self) -> None:
        # Last resort at interpreter exit, for a server whose owner never stopped it.
        if self._proc is not None:
            _signal_group(self._proc.pid, signal.SIGKILL)

    def __enter__(self) -> "LocalServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def get_json(self, path: str, timeout: float = 60.0) -> Any:
        return json.loads(self.get_text(path, timeout))

    def get_text(self, path: str, timeout: float = 60.0) -> str:
        with urllib.request.urlopen(self.url(path), timeout=timeout) as reply:
            return reply.read().decode()

    def post_json(self, path: str, body: Mapping[str, Any], headers: Mapping[str, str] | None = None,
                  timeout: float = 120.0) -> Any:
        """POST `body` as JSON and return the decoded reply; HTTP errors raise urllib's HTTPError."""
        request = urllib.request.Request(self.url(path), data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json", **(headers or {})})
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            return json.loads(reply.read())


@contextlib.contextmanager
def side_by_side(servers: Iterable[LocalServer]) -> Iterator[list[LocalServer]]:
    """Start ``servers`` at once, each from a thread of its own (on separate cores the whole takes
    about one start's time), and stop every one on the way out; one may be stopped earlier. If one
    fails to start, the others are stopped and the first failure is raised."""
    servers = list(servers)
    try:
        with ThreadPoolExecutor(max(1, len(servers))) as pool:
            starts = [pool.submit(server.start) for server in servers]
        failed = [start.exception() for start in starts if start.exception() is not None]
        if failed:
            raise failed[0]
        yield servers
    finally:
        for server in servers:
            server.stop()  # a no-op for one never started or already stopped


def _log_end(path: str | os.PathLike, size: int = 4096) -> bytes:
    """The last ``size`` bytes of a server's log, lower-cased."""
    with open(path, "rb") as log:
        log.seek(max(0, os.path.getsize(path) - size))
        return log.read().lower()


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass  # already gone


def process_group_alive(pgid: int) -> bool:
    """Whether any process of group ``pgid`` still exists."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True
