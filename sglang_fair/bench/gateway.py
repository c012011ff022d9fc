"""SGLang's own gateway (``sglang-router``) in front of single-worker servers, as a system under test.

What an SGLang user already has for data parallelism without ``--dp``: N
independent servers, each pinned to its own slice of this machine's cores,
and the gateway routing between them (its ``cache_aware`` rule by default).
The gateway is an optional extra (``pip install sglang-router``);
``gateway_missing`` says why it cannot run when it is absent.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from sglang_fair.testing.server import LocalServer, pick_free_port


def gateway_missing() -> str | None:
    """None when the gateway can run here, else what to install."""
    if importlib.util.find_spec("sglang_router") is None:
        return "the SGLang gateway is not installed (pip install sglang-router==0.3.2)"
    return None


class Gateway(contextlib.AbstractContextManager):
    """``workers`` servers (``server_args`` each, one slice of ``cpus`` each) behind the gateway."""

    def __init__(self, workers: int, server_args: Sequence[str], gateway_args: Sequence[str] = (),
                 cpus: Sequence[int] | None = None, log_dir: Path | None = None,
                 startup_timeout_s: float = 180.0) -> None:
        cpus = sorted(cpus or os.sched_getaffinity(0))
        if len(cpus) < workers:
            raise ValueError(f"{workers} gateway workers need {workers} cores, {len(cpus)} available")
        per = len(cpus) // workers if workers else 0
        self.slices = [cpus[i * per:(i + 1) * per] for i in range(workers)]
        self.server_args, self.gateway_args = list(server_args), list(gateway_args)
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
               log_dir: Path | None = None) -> "Gateway":
        """The gateway alone, in front of workers already serving at ``worker_urls``."""
        gateway = cls(0, [], gateway_args, log_dir=log_dir)
        gateway.worker_urls = list(worker_urls)
        return gateway

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> "Gateway":
        missing = gateway_missing()
        if missing:
            raise RuntimeError(missing)
        try:
            if self.slices:
                for i, cores in enumerate(self.slices):
                    server = LocalServer(module="sglang_fair.launch_server", extra_args=self.server_args, cpus=cores,
                                         log_path=self.log_dir / f"worker-{i}.log")
                    self.servers.append(self._stack.enter_context(server))
                self.worker_urls = [server.base_url for server in self.servers]
            self._start_gateway()
        except BaseException:
            self.__exit__(*sys.exc_info())
            raise
        return self

    def _start_gateway(self) -> None:
        self.port, metrics_port = _two_free_ports()
        log = open(self.log_dir / "gateway.log", "wb")
        self._stack.callback(log.close)
        command = [sys.executable, "-m", "sglang_router.launch_router", "--host", "127.0.0.1", "--port",
                   str(self.port), "--worker-urls", *self.worker_urls, *self.gateway_args]
        if "--prometheus-port" not in self.gateway_args:  # its default, 29000, would collide with a second gateway
            command += ["--prometheus-port", str(metrics_port)]
        self._proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                      start_new_session=True)
        deadline = time.monotonic() + self.startup_timeout_s
        while True:
            if self._proc.poll() is not None:
                raise RuntimeError(f"the gateway exited with code {self._proc.returncode}; "
                                   f"log: {self.log_dir / 'gateway.log'}")
            try:  # its /health answers before it has registered the workers: wait for them
                with urllib.request.urlopen(self.base_url + "/workers", timeout=5) as reply:
                    workers = json.loads(reply.read()).get("workers", [])
                if sum(1 for w in workers if w.get("is_healthy")) == len(self.worker_urls):
                    return
            except (OSError, ValueError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the gateway did not list its workers healthy in {self.startup_timeout_s:.0f} s; "
                                   f"log: {self.log_dir / 'gateway.log'}")
            time.sleep(0.5)

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
