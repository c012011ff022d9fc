"""Fixtures for tests that use SGLang's real classes in-process (marked ``engine``)."""

from __future__ import annotations

import json
import os

import pytest


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
