"""A throttled request's 429 keeps its ``Retry-After`` on the way out of the HTTP server.

The scheduler refuses a request FairServe throttles with status 429 and the
seconds to wait (``scheduler/arrival_throttle.py``, ``throttle_arrivals``); SGLang's
HTTP side would answer it without the header. Hooks (``binding/hooks.py``):

* ``retry_after_header`` AROUND ``TokenizerManager._handle_abort_finish_reason``;
* ``install_throttle_handler`` BEFORE ``http_server.launch_server`` (and
  ``ray.http_server.launch_server``).
"""

from __future__ import annotations

from http import HTTPStatus


async def retry_after_header(original, manager, out, *args, **kwargs):
    """AROUND ``TokenizerManager._handle_abort_finish_reason``: a throttled request's 429 keeps
    its ``Retry-After``. SGLang 0.5.22 ends only 400/500/503 aborts as errors (a 429 would
    answer 200), so SGLang handles ours as a 503, with its usual cleanup, and we answer 429."""
    import fastapi

    reason = out["meta_info"]["finish_reason"]
    throttled = (isinstance(reason, dict) and reason.get("type") == "abort"
                 and reason.get("status_code") == HTTPStatus.TOO_MANY_REQUESTS)
    if not throttled:
        return await original(manager, out, *args, **kwargs)
    status, reason["status_code"] = reason["status_code"], int(HTTPStatus.SERVICE_UNAVAILABLE)
    try:
        return await original(manager, out, *args, **kwargs)  # a stream's abort chunk, or raises
    except fastapi.HTTPException as exc:
        headers = {"Retry-After": str(reason["retry_after"])} if reason.get("retry_after") is not None else None
        raise fastapi.HTTPException(HTTPStatus.TOO_MANY_REQUESTS, exc.detail, headers=headers) from None
    finally:
        reason["status_code"] = status


def install_throttle_handler(server_args, *args, **kwargs):
    """BEFORE ``http_server.launch_server``: SGLang's own HTTPException handler drops
    headers, so 429s get a handler of their own that keeps ``Retry-After``."""
    import fastapi
    from fastapi.responses import ORJSONResponse
    from sglang.srt.entrypoints.http_server import app

    async def answer_throttled(request, exc: fastapi.HTTPException):
        if exc.status_code != HTTPStatus.TOO_MANY_REQUESTS or not exc.headers:
            return await _default_http_handler(request, exc)
        body = {"object": "error", "message": exc.detail, "type": str(exc.status_code), "code": exc.status_code}
        return ORJSONResponse(body, status_code=exc.status_code, headers=exc.headers)

    _default_http_handler = app.exception_handlers[fastapi.HTTPException]
    app.add_exception_handler(fastapi.HTTPException, answer_throttled)
    return None
