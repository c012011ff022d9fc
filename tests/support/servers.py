"""Real servers shared by the tests of a session (the ``server_pool`` fixture, tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from sglang_fair.testing.server import LocalServer

STATE_DEADLINE_S = 3.0  # how long the shared --dp 2 server's info and admin calls wait for a rank
ADMIN_KEY = "admin-secret"  # the admin key of the shared servers that take run-time settings
# Treat the server as always overloaded, and allow one request per user per minute.
FAIRSERVE_CONFIG = {"fairserve": {"overload_kv_usage": 0.0, "user_limit": 1, "window_s": 60}}
# On PYTHONPATH with SGLANG_FAIR_TEST_FAULTS=1: faults that only clients ``boom`` and ``bang`` set off.
FAULTS = Path(__file__).resolve().parent / "fault_injection"


def fairserve_config_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``FAIRSERVE_CONFIG`` written once per session, for the shared FairServe servers."""
    import yaml

    config = tmp_path_factory.getbasetemp() / "fairserve-shared.yaml"
    if not config.exists():
        config.write_text(yaml.safe_dump(FAIRSERVE_CONFIG))
    return config


_LAST_USERS = pytest.StashKey[dict]()  # shared server's fixture -> the node id of the last test using it


class ServerPool:
    """Real servers shared by the tests of a session, one per set of settings."""

    def __init__(self) -> None:
        self._servers: dict[tuple, LocalServer] = {}
        self._failed: dict[tuple, str] = {}
        self._taken: list[LocalServer] = []

    def get(self, extra_args: Sequence[str], env: Mapping[str, str] | None = None, **options) -> LocalServer:
        """The running server with these settings (``LocalServer``'s fields), started on first use."""
        env = dict(env or {})
        key = (tuple(extra_args), tuple(sorted(env.items())), tuple(sorted(options.items())))
        if key in self._failed:  # one failed start per session, not one per test
            pytest.fail(f"the shared server {' '.join(extra_args)} did not start:\n{self._failed[key]}")
        server = self._servers.get(key)
        if server is None:
            try:
                server = LocalServer(extra_args=list(extra_args), env=env, **options).start()
            except Exception as error:
                self._failed[key] = str(error)
                raise
            self._servers[key] = server
        if server.poll() is not None:
            pytest.fail(f"the shared server {' '.join(extra_args)} exited with code {server.poll()} (a test "
                        f"stopped it, or it crashed)\n{server.log_tail()}")
        return server

    def release_after_last_user(self, request: pytest.FixtureRequest, fixture: str, server: LocalServer) -> None:
        """Stop ``server`` if the test of ``request`` is the session's last to use ``fixture``: an idle
        server left up until the session ends takes memory and some CPU from every later test."""
        last = request.session.stash.setdefault(_LAST_USERS, {})
        if fixture not in last:
            users = [item.nodeid for item in request.session.items if fixture in getattr(item, "fixturenames", ())]
            last[fixture] = users[-1] if users else None
        if request.node.nodeid == last[fixture]:
            for key, running in list(self._servers.items()):
                if running is server:
                    del self._servers[key]
                    server.stop()

    def take(self, server: LocalServer) -> LocalServer:
        """Hand ``server`` to a test that breaks it (marked ``takes_shared_server``, so it runs after every
        other test): no later test gets it, one asking for the same settings gets a fresh server."""
        for key, running in list(self._servers.items()):
            if running is server:
                del self._servers[key]
        self._taken.append(server)  # stopped at the session's end if the test does not stop it
        return server

    def stop_all(self) -> None:
        for server in [*self._servers.values(), *self._taken]:
            server.stop()
        self._servers.clear()
        self._taken.clear()
