"""Fixtures for tests that use SGLang's real classes in-process (marked ``engine``), and the real
servers (marked ``server``) that the tests under tests/binding share (see tests/conftest.py)."""

from __future__ import annotations

import json
import os

import pytest
from tests.support.servers import ADMIN_KEY, FAULTS, fairserve_config_file


@pytest.fixture(scope="session")
def sglang_runtime():
    """SGLang's runtime context plus the sglang-fair hooks, applied once per session."""
    sglang = pytest.importorskip("sglang")
    from sglang_fair.testing.engine_pass import publish_test_runtime

    publish_test_runtime()
    return sglang


@pytest.fixture
def fair_config(monkeypatch):
    """Set the options a FairSchedulePolicy built in this test will read."""

    def set_options(**options):
        monkeypatch.setenv("SGLANG_FAIR_CONFIG", json.dumps(options))

    return set_options


@pytest.fixture(autouse=True)
def _restore_fair_environment():
    """The launcher hooks under test export their configuration into os.environ
    (as they do in a real launch); keep it from leaking into later tests and
    into the servers they start."""
    saved = {key: value for key, value in os.environ.items() if key.startswith("SGLANG_FAIR_")}
    yield
    for key in [key for key in os.environ if key.startswith("SGLANG_FAIR_") and key not in saved]:
        del os.environ[key]
    os.environ.update(saved)


@pytest.fixture
def dlpm_server(server_pool, request):
    """One worker under ``--policy dlpm``, with metrics and the admin API, shared by the tests that need
    nothing else. Its processes carry the test faults (``tests/support/fault_injection``), which only
    requests of the clients ``boom`` and ``bang`` set off."""
    env = {"SGLANG_FAIR_TEST_FAULTS": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(FAULTS), os.environ.get("PYTHONPATH")]))}
    args = ["--policy", "dlpm", "--enable-metrics", "--admin-api-key", ADMIN_KEY]
    server = server_pool.get(args, env=env, module="sglang_fair.launch_server", skip_tokenizer_init=True)
    yield server
    server_pool.release_after_last_user(request, "dlpm_server", server)


@pytest.fixture
def fairserve_server(server_pool, tmp_path_factory, request):
    """One worker under ``--policy fairserve`` with the throttle of ``FAIRSERVE_CONFIG`` and the admin API, shared."""
    args = ["--policy", "fairserve", "--fair-policy-config", str(fairserve_config_file(tmp_path_factory)),
            "--admin-api-key", ADMIN_KEY]
    server = server_pool.get(args, module="sglang_fair.launch_server", skip_tokenizer_init=True)
    yield server
    server_pool.release_after_last_user(request, "fairserve_server", server)
