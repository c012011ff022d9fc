"""An in-process aiohttp stand-in for SGLang's /generate, ONLY for error paths
a real server cannot be made to produce on demand (timeouts, HTTP 500s and
dropped connections mid-run, error events mid-stream). Normal replay is
tested against the real SGLang server (test_http_backend_server.py).

The behaviour is chosen by the request's program id prefix (rid
``<behaviour>/...``): ``ok``, ``slow`` (sleeps), ``fail`` (HTTP 500),
``drop`` (closes the connection), ``streamerr`` (error event mid-stream),
``garbage`` (a meta_info that is not an object), ``throttle`` (HTTP 429 with
``Retry-After: 7``), ``throttlenodate`` (HTTP 429 without it), ``streamabort``
(HTTP 200, then an abort event with status 429, as SGLang streams a refusal),
``streamfail`` (the same with status 503). The headers of
each request are kept in ``headers``.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections import Counter

from aiohttp import web

PORTS = range(32060, 32100)
# Well past any timeout a test sets, which in turn stays well above how long
# an "ok" reply takes on a loaded CI machine.
SLOW_S = 4.0


def free_port() -> int:
    for port in PORTS:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port in 32060-32099")


class FakeServer:
    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.received: Counter[str] = Counter()
        self.headers: dict[str, dict[str, str]] = {}
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> "FakeServer":
        self._thread.start()
        assert self._started.wait(10), "fake server did not start"
        return self

    def __exit__(self, *exc) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._main())

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        app = web.Application()
        app.router.add_get("/health", self._health)
        app.router.add_post("/generate", self._generate)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", self.port).start()
        self._started.set()
        await self._stop.wait()
        await runner.cleanup()

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _generate(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        rid = body["rid"]
        self.received[rid] += 1
        self.headers[rid] = dict(request.headers)
        behaviour = rid.split("/", 1)[0]
        if behaviour == "throttle":
            return web.Response(status=429, text="too many requests", headers={"Retry-After": "7"})
        if behaviour == "throttlenodate":
            return web.Response(status=429, text="too many requests")
        if behaviour == "fail":
            return web.Response(status=500, text="internal error")
        if behaviour == "drop":
            request.transport.close()
            return web.Response(status=500)
        if behaviour == "garbage":
            return web.Response(text='data: {"meta_info": [1, 2], "output_ids": [1]}\n\n')
        if behaviour == "slow":
            await asyncio.sleep(SLOW_S)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        n = body["sampling_params"]["max_new_tokens"]
        prompt = len(body["input_ids"])
        for k in range(1, n + 1):
            if behaviour in ("streamabort", "streamfail"):
                status = 429 if behaviour == "streamabort" else 503
                reason = {"type": "abort", "status_code": status, "message": "refused", "retry_after": 5}
                event = {"output_ids": [], "meta_info": {"prompt_tokens": prompt, "completion_tokens": 0,
                                                         "finish_reason": reason}}
                await resp.write(f"data: {json.dumps(event)}\n\n".encode() + b"data: [DONE]\n\n")
                return resp
            if behaviour == "streamerr" and k == 2:
                await resp.write(b'data: {"error": {"message": "engine crashed"}}\n\n')
                return resp
            event = {"output_ids": list(range(k)),
                     "meta_info": {"prompt_tokens": prompt, "completion_tokens": k, "cached_tokens": 0}}
            await resp.write(f"data: {json.dumps(event)}\n\n".encode())
        await resp.write(b"data: [DONE]\n\n")
        return resp
