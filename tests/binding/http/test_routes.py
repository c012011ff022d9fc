"""A route rebuilt around a wrapper answers like the original, in its place, with the hook's changes."""

from __future__ import annotations

import asyncio
import json

import pytest
from fastapi import FastAPI, Request
from pydantic import BaseModel

from sglang_fair.binding.http.routes import wrap_route


class Body(BaseModel):
    text: str
    routing_key: str | None = None


def _app() -> FastAPI:
    app = FastAPI()

    @app.api_route("/generate", methods=["POST", "PUT"])
    async def generate(obj: Body, request: Request):
        return {"text": obj.text, "routing_key": obj.routing_key}

    @app.api_route("/{anything}", methods=["POST"])  # a catch-all after it: order must hold
    async def catch_all(anything: str):
        return {"caught": anything}

    return app


def _call(app: FastAPI, path: str, body: dict, headers: dict | None = None) -> tuple[int, dict]:
    raw = json.dumps(body).encode()
    scope = {"type": "http", "http_version": "1.1", "method": "POST", "path": path, "raw_path": path.encode(),
             "root_path": "", "scheme": "http", "query_string": b"", "server": ("test", 80), "client": ("c", 1),
             "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode())]
             + [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]}
    sent: list[dict] = []

    async def receive():
        return {"type": "http.request", "body": raw, "more_body": False}

    async def send(message):
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    payload = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, json.loads(payload)


def test_the_wrapped_route_runs_the_hook_before_and_after_in_the_original_place():
    app = _app()
    order = [route.path for route in app.router.routes]

    def client_from_header(obj, request):
        obj.routing_key = request.headers.get("x-client-id")

    wrap_route(app, "/generate", before=client_from_header, after=lambda out: out | {"wrapped": True})
    assert [route.path for route in app.router.routes] == order
    status, out = _call(app, "/generate", {"text": "hi"}, {"X-Client-Id": "alice"})
    assert (status, out) == (200, {"text": "hi", "routing_key": "alice", "wrapped": True})
    # FastAPI still validates the body as the original route declared it.
    assert _call(app, "/generate", {"no_text": 1})[0] == 422
    assert _call(app, "/other", {})[1] == {"caught": "other"}


def test_a_second_launch_in_one_process_wraps_once():
    app = _app()
    calls = []
    for _ in range(2):
        wrap_route(app, "/generate", before=lambda obj, request: calls.append(obj.text))
    _call(app, "/generate", {"text": "once"})
    assert calls == ["once"]


def test_a_route_sglang_no_longer_has_is_named():
    with pytest.raises(RuntimeError, match="no route /server_info"):
        wrap_route(_app(), "/server_info", after=dict)
