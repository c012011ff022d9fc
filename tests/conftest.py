"""Shared fixtures. Keep this small: fixtures used by one directory live there.

Real servers (tests marked ``server``) are slow to start, so tests that need
the same flags share one: ask ``server_pool`` (tests/support/servers.py) for a
server by its settings and it starts it once per session, on first use, and
stops it after the last test that uses it. The shared servers used by more than one directory are defined here
(``dlpm_dp2_server``, ``lpm_server``, ``patched_fairserve_server``), the others in their directory's conftest.py. A test on
a shared server must leave it as it found it (restore what it changed at run
time, e.g. through ``/fair/settings``) and never stop it or kill its workers:
a test that does launches its own ``LocalServer``, or takes the shared one
(``server_pool.take``) and is marked ``takes_shared_server``, which runs it
after every other test. The session's summary says
how many servers this process launched.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sglang_fair.binding.common.settings import STATE_DEADLINE_ENV
from sglang_fair.testing import server as server_module
from sglang_fair.testing.server import LocalServer
from sglang_fair.tiny_cpu import write_tiny_model
from tests.support.patched_sglang import build_patched_tree, patched_env
from tests.support.servers import ADMIN_KEY, STATE_DEADLINE_S, ServerPool, fairserve_config_file

_launches: list[tuple[float, float, str]] = []  # (seconds to healthy, then to quiet, the arguments)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random-weight Llama model directory (config + tokenizer; serve with --load-format dummy)."""
    return write_tiny_model(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="session")
def server_pool():
    pool = ServerPool()
    yield pool
    pool.stop_all()


@pytest.fixture
def dlpm_dp2_server(server_pool: ServerPool, request: pytest.FixtureRequest):
    """``--policy dlpm --dp 2`` (the cluster-wide router) with metrics and the admin API, shared. An info
    or admin call waits at most 3 s for a rank (tests/binding/test_e2e_worker_death.py stops one)."""
    args = ["--policy", "dlpm", "--dp", "2", "--enable-metrics", "--admin-api-key", ADMIN_KEY]
    env = {STATE_DEADLINE_ENV: str(STATE_DEADLINE_S)}
    server = server_pool.get(args, env=env, module="sglang_fair.launch_server", skip_tokenizer_init=True)
    yield server
    server_pool.release_after_last_user(request, "dlpm_dp2_server", server)


@pytest.fixture
def lpm_server(server_pool: ServerPool, request: pytest.FixtureRequest):
    """SGLang's own launcher with ``--schedule-policy lpm`` (our plugin's policies not asked for), shared."""
    server = server_pool.get(["--schedule-policy", "lpm"], max_total_tokens=16384)
    yield server
    server_pool.release_after_last_user(request, "lpm_server", server)


@pytest.fixture(scope="session")
def patched_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The installed SGLang's source with its series from patches/ applied, built once per session."""
    return build_patched_tree(tmp_path_factory.mktemp("patched"))


@pytest.fixture
def patched_fairserve_server(server_pool: ServerPool, patched_tree: Path, tmp_path_factory: pytest.TempPathFactory,
                             request: pytest.FixtureRequest):
    """``--policy fairserve`` (``FAIRSERVE_CONFIG``'s throttle) with metrics, on SGLang built from patches/, shared."""
    args = ["--policy", "fairserve", "--fair-policy-config", str(fairserve_config_file(tmp_path_factory)),
            "--enable-metrics"]
    server = server_pool.get(args, env=patched_env(patched_tree), module="sglang_fair.launch_server",
                             skip_tokenizer_init=True)
    yield server
    server_pool.release_after_last_user(request, "patched_fairserve_server", server)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # A test that breaks a shared server runs after every test that could share it.
    takes = [item for item in items if item.get_closest_marker("takes_shared_server")]
    items[:] = [item for item in items if item not in takes] + takes


def pytest_configure(config: pytest.Config) -> None:
    # Servers whose shutdown no test examines are killed, not drained: SGLang's graceful stop waits for
    # its 5 s watchdog poll, once per launch. Tests of the shutdown call stop(graceful=True).
    os.environ.setdefault(server_module.STOP_ENV, "kill")
    start = LocalServer.start
    if getattr(start, "_counted", False):
        return

    def counted_start(self: LocalServer) -> LocalServer:
        try:
            return start(self)
        finally:  # failed starts count too
            _launches.append((self.startup_s or 0.0, self.settle_s or 0.0,
                              " ".join(map(str, self.extra_args)) or "(no extra args)"))

    counted_start._counted = True  # type: ignore[attr-defined]
    server_module.LocalServer.start = counted_start  # type: ignore[method-assign]


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if _launches:
        healthy, quiet = sum(x[0] for x in _launches), sum(x[1] for x in _launches)
        terminalreporter.write_line(f"real servers launched by this process: {len(_launches)}, "
                                    f"{healthy:.0f} s to healthy and {quiet:.0f} s more to quiet in all")
        if config.getoption("verbose") > 0 or config.getoption("durations") is not None:
            for up, settle, args in sorted(_launches, reverse=True):
                terminalreporter.write_line(f"  {up:5.1f} s + {settle:4.1f} s  {args}")
