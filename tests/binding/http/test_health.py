"""A dead data-parallel worker shows in /health (503, named) and in /server_info."""

from __future__ import annotations

import json
import threading
import time

import pytest

from sglang_fair.binding.common import settings, worker_status
from sglang_fair.binding.http import health
from sglang_fair.ports import free_port_run
from tests.support.http import call


@pytest.fixture
def status_file(tmp_path, monkeypatch):
    path = tmp_path / "status.json"
    monkeypatch.setenv(settings.STATUS_ENV, str(path))
    return path


def test_nothing_is_known_before_the_controller_writes(status_file) -> None:
    assert worker_status.read_workers() is None
    assert worker_status.degraded_body(worker_status.read_workers()) is None
    status_file.write_text("{not json")
    assert worker_status.read_workers() is None


def test_liveness_round_trips_and_a_dead_worker_degrades(status_file) -> None:
    worker_status.write_status([True, True, True])
    assert worker_status.read_workers() == {"alive": [0, 1, 2], "dead": []}
    assert worker_status.degraded_body(worker_status.read_workers()) is None
    worker_status.write_status([True, False, True])
    body = worker_status.degraded_body(worker_status.read_workers())
    assert body["status"] == "degraded" and body["dead_workers"] == [1] and body["alive_workers"] == [0, 2]
    assert "worker(s) 1 died" in body["message"]


def test_the_launcher_exports_one_path_and_keeps_it(monkeypatch) -> None:
    monkeypatch.delenv(settings.STATUS_ENV, raising=False)
    path = settings.export_status_path()
    assert settings.export_status_path() == path  # the HTTP server and the controller agree


def _get(url: str) -> tuple[int, bytes]:
    reply = call(url, timeout=10)
    return reply.status, reply.body


@pytest.mark.engine
def test_health_answers_503_naming_dead_workers_and_other_paths_pass(status_file) -> None:
    pytest.importorskip("fastapi")
    import fastapi
    import uvicorn

    app = fastapi.FastAPI()

    @app.get("/health")
    async def healthy():
        return fastapi.Response(status_code=200)

    @app.get("/generate")
    async def generate():
        return {"ok": True}

    health.guard_health_checks(app)
    port = free_port_run("127.0.0.1", 1)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        base = f"http://127.0.0.1:{port}"
        assert _get(f"{base}/health")[0] == 200  # nothing written yet: SGLang's own check answers
        worker_status.write_status([True, True])
        assert _get(f"{base}/health")[0] == 200
        worker_status.write_status([True, False])
        status, body = _get(f"{base}/health")
        assert status == 503 and json.loads(body)["dead_workers"] == [1]
        assert _get(f"{base}/generate") == (200, b'{"ok":true}')  # the survivors keep serving
    finally:
        server.should_exit = True
        thread.join(timeout=10)
