"""Honest health under ``--dp`` with our routers: a dead worker shows in ``/health``.

SGLang's ``/health`` and ``/health_generate`` answer 200 as long as one
request gets through, and the router sends it to a live worker, so a server
that lost a data-parallel worker for good (SGLang never restarts one) looked
healthy. The controller knows which workers are alive; the HTTP server is
another process (the same one under ``--use-ray``). The controller writes the
workers' liveness to a small JSON file whose path the launcher exported in
``SGLANG_FAIR_ROUTER_STATUS``; the HTTP server reads it:

* ``/health`` and ``/health_generate`` answer **503** with a JSON body
  ``{"status": "degraded", "alive_workers": [...], "dead_workers": [...]}``
  while any worker is dead, so an orchestrator replaces the server (only a
  restart brings the capacity back); otherwise SGLang's own check runs.
* ``/server_info`` (and ``/get_server_info``): the ``fair_router`` section
  gains ``workers: {"alive": [...], "dead": [...]}``. SGLang's handler waits
  for every worker's live state, so with a dead worker it would never answer;
  it is then answered here with the start-up information,
  ``"internal_states": []`` and the ``degraded`` body above.

Hooks (``binding/hooks.py``): ``install_health_check`` BEFORE
``http_server.launch_server`` and ``ray.http_server.launch_server``.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import tempfile
import uuid
from http import HTTPStatus

STATUS_ENV = "SGLANG_FAIR_ROUTER_STATUS"
_HEALTH_PATHS = ("/health", "/health_generate")
# SGLang's /server_info waits for every worker's internal state, so with one dead it never answers.
_INFO_PATHS = ("/server_info", "/get_server_info")


def export_status_path() -> str:
    """Launcher side: a fresh status file path for this server's controller (removed at exit)."""
    path = os.environ.get(STATUS_ENV)
    if not path:
        path = os.path.join(tempfile.gettempdir(), f"sglang_fair_router_{os.getpid()}_{uuid.uuid4().hex[:8]}.json")
        os.environ[STATUS_ENV] = path
        atexit.register(_remove, path)
    return path


def write_status(alive: list[bool]) -> None:
    """Controller side: record the workers' liveness (atomically; nothing if no path was exported)."""
    path = os.environ.get(STATUS_ENV)
    if not path:
        return
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump({"alive": [bool(a) for a in alive]}, f)
    os.replace(tmp, path)


def read_workers() -> dict | None:
    """``{"alive": [ranks], "dead": [ranks]}`` as the controller last wrote it, or None."""
    path = os.environ.get(STATUS_ENV)
    if not path:
        return None
    try:
        with open(path) as f:
            alive = json.load(f)["alive"]
    except (OSError, ValueError, KeyError, TypeError):
        return None  # not written yet (controller starting), or no router
    return {"alive": [r for r, a in enumerate(alive) if a], "dead": [r for r, a in enumerate(alive) if not a]}


def degraded_body(workers: dict | None) -> dict | None:
    """The 503 body for a health check, or None when every worker is alive (or nothing is known)."""
    if not workers or not workers["dead"]:
        return None
    return {"status": "degraded", "alive_workers": workers["alive"], "dead_workers": workers["dead"],
            "message": f"data-parallel worker(s) {', '.join(map(str, workers['dead']))} died; "
                       "restart the server to restore its capacity"}


def install_health_check(*args, **kwargs) -> None:
    """BEFORE ``launch_server``: answer health checks with 503 while a worker is dead."""
    if os.environ.get(STATUS_ENV):
        from sglang.srt.entrypoints.http_server import app

        guard_health_checks(app)
    return None


def guard_health_checks(app) -> None:
    """Put ``HealthGuard`` in front of ``app``'s routes."""
    app.add_middleware(HealthGuard)


class HealthGuard:
    """ASGI middleware: ``/health`` and ``/health_generate`` answer 503 while a worker is dead."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        path = scope.get("path") if scope["type"] == "http" else None
        if path in _HEALTH_PATHS or path in _INFO_PATHS:
            degraded = degraded_body(read_workers())
            if degraded is not None:
                from starlette.responses import JSONResponse

                if path in _HEALTH_PATHS:
                    response = JSONResponse(degraded, status_code=HTTPStatus.SERVICE_UNAVAILABLE)
                else:
                    response = JSONResponse(_startup_info(degraded))
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _startup_info(degraded: dict) -> dict:
    """``/server_info`` without the live per-worker states a dead worker can never send."""
    from sglang.srt.entrypoints import http_server

    from sglang_fair.binding import router_cli
    from sglang_fair.binding.version import release_before

    state = http_server._global_state
    args = state.tokenizer_manager.server_args
    if release_before("0.5.22"):  # the route function assembles it there, from these start-up fields
        info = {**args.resolved_dict(), "launch_command": args.launch_command, **state.scheduler_info}
        info = router_cli.describe_router(info, args)
    else:
        info = http_server.redact_watermark_secrets(http_server.build_server_info(args, state.scheduler_info))
    return http_server.msgspec_to_builtins({**info, "internal_states": [], "degraded": degraded})


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.remove(path)
