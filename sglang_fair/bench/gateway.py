"""SGLang's gateways in front of single-worker servers, as systems under test.

What an SGLang user has for data parallelism without ``--dp``: N independent
servers, each pinned to its own slice of this machine's cores, and a gateway
routing between them: ``smg`` (the SGLang model gateway, renamed; 1.13) or
``sglang-router`` (0.3.2, its January release). Both install a console script
named ``smg``, so each lives in an environment of its own:
``scripts/install_gateways.sh`` makes them under ``.venv-gateways/<name>/``
(``$SGLANG_FAIR_GATEWAYS`` names another folder). ``gateway_missing`` says why
one cannot run here.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from sglang_fair.binding.common.settings import GATEWAYS_ENV
from sglang_fair.testing.server import LocalServer, pick_free_port, side_by_side

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _get_json(url: str) -> dict:
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:
            return json.loads(reply.read())
    except urllib.error.HTTPError as e:  # smg's /readiness answers 503 with a JSON body until ready
        return json.loads(e.read() or b"{}")


@dataclass(frozen=True)
class GatewayKind:
    name: str  # the folder of its environment under the gateways folder
    requirement: str  # what scripts/install_gateways.sh installs there
    launch: Callable[[Path, int, int, Sequence[str]], list[str]]  # (env, port, metrics port, worker urls) -> argv
    ready: Callable[[str, int], bool]  # (base url, workers) -> all registered and healthy


def _sglang_router_command(env: Path, port: int, metrics_port: int, urls: Sequence[str]) -> list[str]:
    return [str(env / "bin" / "python"), "-m", "sglang_router.launch_router", "--host", "127.0.0.1",
            "--port", str(port), "--prometheus-port", str(metrics_port), "--worker-urls", *urls]


def _sglang_router_ready(base_url: str, workers: int) -> bool:
    listed = _get_json(base_url + "/workers").get("workers", [])  # its /health answers before registration
    return sum(1 for w in listed if w.get("is_healthy")) == workers


def _smg_command(env: Path, port: int, metrics_port: int, urls: Sequence[str]) -> list[str]:
    # No tokenizer download (the servers tokenize); registration retried each second, not every 30 s.
    return [str(env / "bin" / "smg"), "launch", "--host", "127.0.0.1", "--port", str(port),
            "--prometheus-port", str(metrics_port), "--disable-tokenizer-autoload",
            "--worker-startup-check-interval", "1", "--worker-urls", *urls]


def _smg_ready(base_url: str, workers: int) -> bool:
    return _get_json(base_url + "/readiness").get("healthy_workers") == workers  # /health answers at once


GATEWAYS = {
    "smg": GatewayKind("smg", "smg==1.13.0", _smg_command, _smg_ready),
    "sglang-router": GatewayKind("sglang-router", "sglang-router==0.3.2", _sglang_router_command,
                                 _sglang_router_ready),
}


def gateways_folder() -> Path:
    given = os.environ.get(GATEWAYS_ENV)
    return Path(given) if given else Path(__file__).resolve().parents[2] / ".venv-gateways"


def gateway_missing(kind: str = "sglang-router") -> str | None:
    """None when the gateway ``kind`` can run here, else what to install."""
    gateway = GATEWAYS[kind]
    env = gateways_folder() / gateway.name
    probe = gateway.launch(env, 0, 0, [])[0]
    if not os.access(probe, os.X_OK):
        return (f"{gateway.requirement} is not installed in {env} (scripts/install_gateways.sh installs it; "
                f"${GATEWAYS_ENV} names another folder of gateway environments)")
    return None


def core_slices(count: int, cpus: Sequence[int] | None = None) -> list[list[int]]:
    """``count`` equal slices of ``cpus`` (default: this process's cores), one per worker."""
    cpus = sorted(cpus or os.sched_getaffinity(0))
    if len(cpus) < count:
        raise ValueError(f"{count} gateway workers need {count} cores, {len(cpus)} available")
    per = len(cpus) // count if count else 0
    return [cpus[i * per:(i + 1) * per] for i in range(count)]


def start_workers(stack: contextlib.ExitStack, cores: Sequence[Sequence[int]], server_args: Sequence[str],
                  log_dir: Path) -> list[LocalServer]:
    """One ``sglang_fair.launch_server`` worker per entry of ``cores`` (``core_slices``), pinned to
    those cores and stopped with ``stack``; a gateway may be started in front of them
    (``Gateway.around``) as many times as wanted.

    They start side by side: each on cores of its own, so the whole takes about one start's time."""
    log_dir.mkdir(parents=True, exist_ok=True)
    servers = [LocalServer(module="sglang_fair.launch_server", extra_args=server_args, cpus=list(mine),
                           log_path=log_dir / f"worker-{i}.log")
               for i, mine in enumerate(cores)]
    return stack.enter_context(side_by_side(servers))


class Gateway(contextlib.AbstractContextManager):
    """``workers`` servers (``server_args`` each, one slice of ``cpus`` each) behind the gateway ``kind``.

    ``files``: name -> text written into the log folder before the gateway starts; ``{name}`` in
    ``gateway_args`` becomes its path (a config file). ``expect_log``: a line the gateway must log
    once ready (smg falls back quietly to FIFO admission when its priority scheduler cannot start).
    """

    def __init__(self, workers: int, server_args: Sequence[str], gateway_args: Sequence[str] = (),
                 cpus: Sequence[int] | None = None, log_dir: Path | None = None,
                 startup_timeout_s: float = 180.0, kind: str = "sglang-router",
                 files: dict[str, str] | None = None, expect_log: str | None = None) -> None:
        self.cores = core_slices(workers, cpus)  # a slice per worker; too few cores: a ValueError now
        self.kind = GATEWAYS[kind]
        self.server_args, self.gateway_args = list(server_args), list(gateway_args)
        self.files, self.expect_log = dict(files or {}), expect_log
        self.log_dir = Path(log_dir or tempfile.mkdtemp(prefix="gateway-"))
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.startup_timeout_s = startup_timeout_s
        self.servers: list[LocalServer] = []
        self.worker_urls: list[str] = []  # set by around(), or from the servers started
        self.port: int | None = None
        self._proc: subprocess.Popen | None = None
        self._stack = contextlib.ExitStack()

    @classmethod
    def around(cls, worker_urls: Sequence[str], gateway_args: Sequence[str] = (),
               log_dir: Path | None = None, kind: str = "sglang-router") -> "Gateway":
        """The gateway alone, in front of workers already serving at ``worker_urls``."""
        gateway = cls(0, [], gateway_args, log_dir=log_dir, kind=kind)
        gateway.worker_urls = list(worker_urls)
        return gateway

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.log_dir / "gateway.log"

    def __enter__(self) -> "Gateway":
        missing = gateway_missing(self.kind.name)
        if missing:
            raise RuntimeError(missing)
        try:
            if self.cores:
                self.servers = start_workers(self._stack, self.cores, self.server_args, self.log_dir)
                self.worker_urls = [server.base_url for server in self.servers]
            self._start_gateway()
        except BaseException:
            self.__exit__(*sys.exc_info())
            raise
        return self

    def _start_gateway(self) -> None:
        paths = {}
        for name, text in self.files.items():
            paths[name] = self.log_dir / name
            paths[name].write_text(text)
        args = list(self.gateway_args)
        for name, path in paths.items():
            args = [arg.replace("{" + name + "}", str(path)) for arg in args]
        self.port, metrics_port = _two_free_ports()
        env = gateways_folder() / self.kind.name
        command = [*self.kind.launch(env, self.port, metrics_port, self.worker_urls), *args]
        log = open(self.log_path, "wb")
        self._stack.callback(log.close)
        self._proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                      start_new_session=True, env={**os.environ, "NO_COLOR": "1"})
        deadline = time.monotonic() + self.startup_timeout_s
        while True:
            if self._proc.poll() is not None:
                raise RuntimeError(f"{self.kind.name} exited with code {self._proc.returncode}; log: {self.log_path}")
            with contextlib.suppress(OSError, ValueError):
                if self.kind.ready(self.base_url, len(self.worker_urls)) and self._logged_expected():
                    return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.kind.name} did not list its {len(self.worker_urls)} workers healthy"
                                   f"{' and log ' + repr(self.expect_log) if self.expect_log else ''} in "
                                   f"{self.startup_timeout_s:.0f} s; log: {self.log_path}")
            time.sleep(0.5)

    def log_text(self) -> str:
        """The gateway's log so far, colour codes removed."""
        return _ANSI.sub("", self.log_path.read_text(errors="replace")) if self.log_path.exists() else ""

    def _logged_expected(self) -> bool:
        return self.expect_log is None or self.expect_log in self.log_text()

    def __exit__(self, *exc: object) -> None:
        if self._proc is not None and self._proc.poll() is None:
            os.killpg(self._proc.pid, signal.SIGTERM)
            try:
                self._proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self._proc.pid, signal.SIGKILL)
                self._proc.wait()
        self._stack.close()


def _two_free_ports() -> tuple[int, int]:
    first = pick_free_port()
    with socket.socket() as held:  # bound while the second is looked for, so the two differ
        held.bind(("127.0.0.1", first))
        return first, pick_free_port()


def smg_priority_config(bulk_tenants: Sequence[str], interactive_slots: int) -> str:
    """A priority-scheduler file for ``smg`` set up by an operator who knows who floods.

    Tenants are named by the trusted ``x-smg-tenant-id`` header (``--trust-tenant-header``), so
    smg keys them ``header:<id>``; each of ``bulk_tenants`` is held to the bulk class whatever it
    asks for, the others take the class their ``x-smg-priority`` header asks up to smg's
    ``--priority-scheduler-default-max-class`` (``default`` unless raised: pass ``interactive``
    for the light tenants to get the interactive class). ``interactive_slots``
    of the capacity stay reserved for the interactive class; nothing else is reserved. smg's
    built-in reservations (at least 32 for system and 128 for interactive) refuse any capacity
    under about 180: it then logs an error and admits first in, first out. Bulk requests are never
    promoted for waiting (its starvation rule would hand them the reserved slots) and no request
    is preempted (a request not yet streaming would be cancelled, whole).
    """
    def cls(floor: int, queue: int, timeout: int, starvation: int) -> str:
        return (f"{{reserved_floor: {floor}, reserved_per_slot: 0.0, queue_size: {queue}, "
                f"queue_timeout_secs: {timeout}, starvation_threshold_secs: {starvation}, can_preempt: false}}")

    lines = ["classes:",
             f"  system: {cls(0, 64, 30, 5)}",
             f"  interactive: {cls(interactive_slots, 256, 600, 5)}",
             f"  default: {cls(0, 512, 600, 30)}",
             f"  bulk: {cls(0, 8192, 3600, 86400)}",
             "tenant_policies:"]
    lines += [f'  "header:{tenant}": {{max_class: bulk}}' for tenant in bulk_tenants]
    return "\n".join(lines) + "\n"
