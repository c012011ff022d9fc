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
  gains ``workers: {"alive": [...], "dead": [...]}``. SGLang's handler waits
  for every worker's live state, so with a dead worker it would never answer;
  it is then answered here with the start-up information,
  ``"internal_states": []`` and the ``degraded`` body above.

Hooks (``binding/hooks.py``): ``install_health_check`` BEFORE
``http_server.launch_server`` and ``ray.http_server.launch_server``.
"""

from __future__ import annotations

from http import HTTPStatus

from sglang_fair.binding.common import settings
from sglang_fair.binding.common.worker_status import degraded_body, read_workers

_HEALTH_PATHS = ("/health", "/health_generate")
# SGLang's /server_info waits for every worker's internal state, so with one dead it never answers.
_INFO_PATHS = ("/server_info", "/get_server_info")


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

    from sglang_fair.binding.common.version import release_before
    from sglang_fair.binding.http.server_info import describe_router

    state = http_server._global_state
    args = state.tokenizer_manager.server_args
    if release_before("0.5.22"):  # the route function assembles it there, from these start-up fields
        info = {**args.resolved_dict(), "launch_command": args.launch_command, **state.scheduler_info}
        info = describe_router(info, args)
    else:
        info = http_server.redact_watermark_secrets(http_server.build_server_info(args, state.scheduler_info))
    return http_server.msgspec_to_builtins({**info, "internal_states": [], "degraded": degraded})

