"""Honest health under ``--dp`` with our routers: a dead worker shows in ``/health``.

SGLang's ``/health`` and ``/health_generate`` answer 200 as long as one
request gets through, and the router sends it to a live worker, so a server
that lost a data-parallel worker for good (SGLang never restarts one) looked
healthy. The controller writes the workers' liveness to a small file
(``common/worker_status.py``); the HTTP server reads it:

* ``/health`` and ``/health_generate`` answer **503** with a JSON body
  ``{"status": "degraded", "alive_workers": [...], "dead_workers": [...]}``
  while any worker is dead, so an orchestrator replaces the server (only a
  restart brings the capacity back); otherwise SGLang's own check runs.
* ``/server_info`` (and ``/get_server_info``): the ``fair_router`` section
  gains ``workers: {"alive": [...], "dead": [...]}`` (``server_info.py``).
  SGLang's handler waits for every worker's live state; the controller
  answers for a dead worker (``controller/dead_rank_answers.py``), so the
  survivors' states come back with ``{"dp_rank": r, "dead_worker": true}``
  in the dead one's place.

Hooks (``binding/hooks.py``): ``install_health_check`` BEFORE
``http_server.launch_server`` and ``ray.http_server.launch_server``.
"""

from __future__ import annotations

from http import HTTPStatus

from sglang_fair.binding.common import settings
from sglang_fair.binding.common.worker_status import degraded_body, read_workers

_HEALTH_PATHS = ("/health", "/health_generate")


def install_health_check(*args, **kwargs) -> None:
    """BEFORE ``launch_server``: answer health checks with 503 while a worker is dead."""
    if settings.status_path():
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
        if path in _HEALTH_PATHS:
            degraded = degraded_body(read_workers())
            if degraded is not None:
                from starlette.responses import JSONResponse

                response = JSONResponse(degraded, status_code=HTTPStatus.SERVICE_UNAVAILABLE)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
