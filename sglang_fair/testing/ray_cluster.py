"""A single-node Ray cluster for tests of SGLang's ``--use-ray`` backend.

SGLang places one scheduler actor per GPU, so on a CPU-only machine the
cluster declares logical GPUs (Ray only counts them; nothing uses a device).
The head runs ``ray start --block`` in its own process group and is torn down
with it, leaving the machine's other Ray clusters alone.

    with LocalRayCluster(num_gpus=2) as cluster:
        LocalServer(extra_args=["--use-ray", "--dp", "2"], env=cluster.client_env)
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from collections.abc import Iterator
from pathlib import Path

from sglang_fair.binding.common.settings import HOST_ENV
from sglang_fair.testing.server import pick_free_port


# Ray runs its workers at this niceness so that the processes driving them stay
# responsive (Ray's RAY_worker_niceness default).
WORKER_NICENESS = 15

# A test cluster on loopback, torn down with the test: no token. (Without this,
# a token in ~/.ray left by any earlier local Ray makes clients fail to join.)
_NO_AUTH = {"RAY_AUTH_MODE": "disabled"}


def network_address() -> str:
    """This machine's first non-loopback IPv4 address (loopback if it has none): where
    actors on other nodes would reach this one's sockets."""
    import psutil

    for addresses in psutil.net_if_addrs().values():
        for address in addresses:
            if address.family == socket.AF_INET and not address.address.startswith("127."):
                return address.address
    return "127.0.0.1"


class RayStartError(RuntimeError):
    """The Ray head did not come up; the message carries its log tail."""


@dataclass
class LocalRayCluster:
    num_gpus: int = 2
    num_cpus: int = 2
    startup_timeout_s: float = 90.0
    port: int | None = None
    _proc: subprocess.Popen | None = field(default=None, repr=False)
    _dir: str | None = field(default=None, repr=False)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def client_env(self) -> dict[str, str]:
        """Environment for a process that joins this cluster."""
        return {"RAY_ADDRESS": self.address, **_NO_AUTH}

    def start(self) -> "LocalRayCluster":
        ray_cli = Path(sys.executable).with_name("ray")
        if not ray_cli.exists():
            raise RayStartError(f"no `ray` command next to {sys.executable}; install ray")
        self.port = self.port or pick_free_port()
        # Short path: Ray's unix sockets live under it (107-byte limit).
        self._dir = tempfile.mkdtemp(prefix="sfray", dir="/tmp")
        command = [
            str(ray_cli), "start", "--head", "--block", f"--port={self.port}",
            f"--num-cpus={self.num_cpus}", f"--num-gpus={self.num_gpus}",
            "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={self._dir}",
        ]
        env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", **_NO_AUTH)
        self._log = open(os.path.join(self._dir, "head.log"), "wb")
        self._proc = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT, env=env,
                                      start_new_session=True)
        lower_session_priority(self._proc.pid, WORKER_NICENESS)
        deadline = time.monotonic() + self.startup_timeout_s
        while not self._answers():
            if self._proc.poll() is not None or time.monotonic() > deadline:
                tail = self._tail()
                self.stop()
                raise RayStartError(f"Ray head on port {self.port} did not start:\n{tail}")
            time.sleep(0.5)
        return self

    def _answers(self) -> bool:
        return "Ray runtime started" in self._tail()

    def _tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(Path(self._dir, "head.log").read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            # `ray start --block` stops the head's processes on SIGTERM; whatever
            # is left of its process group after that is killed.
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._proc.wait()
        self._proc = None
        if self._dir:
            self._log.close()
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> "LocalRayCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def session_autogroup(pid: int) -> str | None:
    """The autogroup line of ``pid`` ("/autogroup-7 nice 0"), or None where the kernel does not
    schedule it by session: no autogroup support, autogroup turned off, or the process in a
    cgroup's own task group (as in most containers), where the file reads empty."""
    try:
        with open(f"/proc/{pid}/autogroup") as autogroup:
            line = autogroup.read().strip()
    except OSError:
        return None
    return line or None


def lower_session_priority(pid: int, nice: int) -> bool:
    """Give the session of ``pid`` (Linux autogroup) the niceness ``nice``; False where the
    kernel does not group it by session (niceness then ranks its processes directly).

    With autogroup, niceness only ranks tasks within one session, and the head runs in a
    session of its own: on a CPU-only machine, Ray's scheduler actors (niceness 15) took both
    cores from the server's HTTP and router threads, which got about 3% of a core (a /metrics
    answer that takes 9 ms idle took up to 12 s)."""
    if session_autogroup(pid) is None:
        return False
    try:
        with open(f"/proc/{pid}/autogroup", "w") as autogroup:
            autogroup.write(str(nice))
    except OSError:
        return False
    return True


@contextlib.contextmanager
def ray_backend(num_gpus: int = 2) -> Iterator[tuple[list[str], dict[str, str]]]:
    """A local cluster for a ``--use-ray`` server: yields the launcher arguments and the environment
    to add, the router's sockets on this machine's network address as for workers on other nodes."""
    with LocalRayCluster(num_gpus=num_gpus) as cluster:
        yield ["--use-ray"], {**cluster.client_env, HOST_ENV: network_address()}

