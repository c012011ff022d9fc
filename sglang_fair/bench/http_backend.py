"""Live replay client: asyncio + aiohttp against a running server.

Two APIs:

* ``generate``: SGLang's native ``/generate`` with ``input_ids``, streaming.
  The client id travels as the ``X-Client-Id`` header and ``routing_key``.
  Token counts and ``cached_tokens`` come from ``meta_info``; ``output_ids``
  give the exact continuation that children of the call extend.
* ``openai``: ``/v1/completions`` with the prompt as token ids, the client id
  in ``user``, streaming with usage. ``return_token_ids`` (an SGLang
  extension) asks for the output ids; a server that ignores it leaves the
  client without them, so children extend a deterministic stand-in of the
  same length (documented in docs/benchmarking.md: the parent's prompt is
  still a shared prefix, its output is not).

Every call carries its application identity as headers, for policies that
use it (FairServe, Justitia): ``X-App-Id`` = the program's kind,
``X-Interaction-Id`` = its program id, ``X-Interaction-Stage`` = the call's
index. A refusal by the server's policy (HTTP 429, or a 429 abort inside a
stream that already answered 200) is an error record marked ``throttled``
with the ``Retry-After`` it gave; it is not retried.

For the fairness audit (docs/metrics.md) each record keeps the output
progress seen at the client (streamed chunk arrival times and cumulative
tokens), the data-parallel rank (``dp_rank``) and the retraction count
(``num_retractions``); with ``--enable-metrics`` on the server, also the
admission time (``forward_entry_time``, first entry into a forward batch,
on the server's clock) and the server's queueing time (``queue_time``). The
server's configuration comes from ``/server_info`` (sglang_fair/bench/server_params.py).

Each call is sent once all its parents finished; a failed parent turns its
children into error records without sending them. Every call ends as one
record. Consecutive connection failures abort the run (the server is gone):
the calls not yet sent are recorded as aborted.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field

import aiohttp
from tqdm import tqdm

from sglang_fair.bench.backend import API_CHOICES, BackendError
from sglang_fair.bench.server_params import server_params
from sglang_fair.runs.records import RequestRecord, RunResult
from sglang_fair.workloads.model import Call, Program, Workload
from sglang_fair.workloads.validate import check_workload

# This many connection failures in a row (no response at all) means the
# server is down; waiting for every later arrival would only add error rows.
ABORT_AFTER_CONNECTION_FAILURES = 8
HEALTH_TIMEOUT_S = 10.0


@dataclass
class _Outcome:
    """What a finished call leaves for its children."""

    ok: bool
    prompt_ids: list[int] = field(default_factory=list)
    output_ids: list[int] = field(default_factory=list)


@dataclass
class _Reply:
    output_ids: list[int]
    prompt_tokens: int
    output_tokens: int
    cached_tokens: int | None
    t_first_token: float | None
    progress: list[list[float]] | None = None
    timing: dict = field(default_factory=dict)  # RequestRecord fields read from meta_info (server_timing)
    meta: dict = field(default_factory=dict)  # the last meta_info, as the server sent it


class _ServerError(Exception):
    """The server answered, but with an error."""


class _Throttled(_ServerError):
    """HTTP 429: the server's policy refused the request."""

    def __init__(self, message: str, retry_after_s: float | None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


def retry_after_seconds(value: str | None) -> float | None:
    """``Retry-After`` as seconds (delta-seconds form; None if absent or an HTTP date)."""
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    return seconds if seconds is not None and seconds >= 0 else None


def identity_headers(client: str, program: Program, index: int) -> dict[str, str]:
    """Client and application identity headers of call ``index`` of ``program``."""
    # The server splits its routing key on ';' and headers must be ASCII: quote the ids.
    quote = lambda v: urllib.parse.quote(v, safe="/._@-")  # noqa: E731
    headers = {"X-Client-Id": client, "X-Interaction-Id": quote(program.program_id),
               "X-Interaction-Stage": str(index)}
    if program.kind:
        headers["X-App-Id"] = quote(program.kind)
    return headers


def server_timing(meta: dict, wall_t0: float) -> dict:
    """RequestRecord fields SGLang's ``meta_info`` gives, times made relative to the run.

    ``forward_entry_time`` and ``queue_time`` are only sent by a server started
    with ``--enable-metrics``; the first is a wall-clock time on the server, so
    ``t_admitted`` is only as good as the two machines' clock agreement.
    """
    out: dict = {}
    if isinstance(meta.get("dp_rank"), int):
        out["worker"] = meta["dp_rank"]
    if isinstance(meta.get("num_retractions"), int):
        out["retractions"] = meta["num_retractions"]
    if isinstance(meta.get("forward_entry_time"), (int, float)) and meta["forward_entry_time"] > 0:
        out["t_admitted"] = float(meta["forward_entry_time"]) - wall_t0
    if isinstance(meta.get("queue_time"), (int, float)):
        out["queue_time_s"] = float(meta["queue_time"])
    return out


def stand_in_output_ids(rid: str, n: int, vocab_size: int) -> list[int]:
    """Deterministic ids for an output the server did not return as ids."""
    base = sum(ord(ch) for ch in rid)
    return [(base + 7919 * k) % vocab_size for k in range(n)]


async def fetch_server_info(session: aiohttp.ClientSession, url: str) -> dict | None:
    """The server's ``/server_info`` (older name ``/get_server_info``); None if it has neither."""
    for path in ("/server_info", "/get_server_info"):
        try:
            async with session.get(url + path, timeout=aiohttp.ClientTimeout(total=HEALTH_TIMEOUT_S)) as r:
                if r.status == 200:
                    info = await r.json(content_type=None)
                    return info if isinstance(info, dict) else None
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError):
            continue
    return None


async def sse_events(session: aiohttp.ClientSession, url: str, body: dict, headers: dict[str, str]):
    """POST ``body`` to ``url`` and yield each JSON event of its server-sent-events answer.

    Raises _Throttled on HTTP 429, _ServerError on another status or a
    malformed event, and either for a refusal inside the stream
    (``refusal_in_stream``).
    """
    async with session.post(url, json=body, headers=headers) as resp:
        if resp.status != 200:
            text = (await resp.text())[:300]
            if resp.status == 429:
                retry = retry_after_seconds(resp.headers.get("Retry-After"))
                after = f"retry after {retry:g} s" if retry is not None else "no Retry-After"
                raise _Throttled(f"HTTP 429 ({after}): {text}", retry)
            raise _ServerError(f"HTTP {resp.status}: {text}")
        async for raw in resp.content:
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                return
            try:
                event = json.loads(data)
            except json.JSONDecodeError as e:
                raise _ServerError(f"malformed stream event {data[:100]!r}: {e}") from e
            if isinstance(event, dict):
                refusal_in_stream(event)
            yield event


def refusal_in_stream(event: dict) -> None:
    """Raise for a stream event that ends the request unanswered.

    A refusal decided after the answer started streaming comes back with HTTP
    200: on ``/generate`` as an event whose ``finish_reason`` is an abort
    (``status_code`` 429 when the server's policy throttled it), on the OpenAI
    routes as an ``error`` event (``code`` 429). Those are throttled or failed
    requests, not served ones.
    """
    error = event.get("error")
    if error:
        code = error.get("code") if isinstance(error, dict) else None
        message = str(error.get("message", error) if isinstance(error, dict) else error)[:300]
        if code == 429:
            raise _Throttled(f"HTTP 429 in stream: {message}", None)
        raise _ServerError(message)
    meta = event.get("meta_info")
    reason = meta.get("finish_reason") if isinstance(meta, dict) else None
    if not (isinstance(reason, dict) and reason.get("type") == "abort"):
        return
    status, message = reason.get("status_code"), str(reason.get("message", "aborted"))[:300]
    if status == 429:
        retry = retry_after_seconds(None if reason.get("retry_after") is None else str(reason["retry_after"]))
        after = f"retry after {retry:g} s" if retry is not None else "no Retry-After"
        raise _Throttled(f"HTTP 429 in stream ({after}): {message}", retry)
    raise _ServerError(f"aborted in stream (status {status}): {message}")


async def read_generate_stream(events, now: Callable[[], float], wall_t0: float, prompt_len: int) -> _Reply:
    """A streamed ``/generate`` answer: output ids, token counts, progress (``now()`` at each new token
    count) and the server's timing (``server_timing``, wall clock made relative with ``wall_t0``)."""
    output_ids: list[int] = []
    meta: dict = {}
    timing: dict = {}
    progress: list[list[float]] = []
    t_first = None
    async for event in events:
        meta = event.get("meta_info", meta)
        timing |= server_timing(meta, wall_t0)  # forward_entry_time comes with the first chunk
        ids = event.get("output_ids") or []
        total = meta.get("completion_tokens")
        # The server streams either cumulative ids (default) or deltas
        # (--incremental-streaming-output); cumulative ones match the count.
        if total is not None and len(ids) == total:
            output_ids = list(ids)
        else:
            output_ids.extend(ids)
        if t_first is None and output_ids:
            t_first = now()
        done = meta.get("completion_tokens", len(output_ids))
        if done and (not progress or done > progress[-1][1]):
            progress.append([now(), int(done)])
    if not meta:
        raise _ServerError("stream ended without any result")
    return _Reply(
        output_ids=output_ids,
        prompt_tokens=int(meta.get("prompt_tokens", prompt_len)),
        output_tokens=int(meta.get("completion_tokens", len(output_ids))),
        cached_tokens=meta.get("cached_tokens"),
        t_first_token=t_first,
        progress=progress,
        timing=timing,
        meta=meta,
    )


class HttpBackend:
    def __init__(
        self,
        url: str,
        *,
        api: str = "generate",
        timeout_s: float = 600.0,
        concurrency: int = 256,
        policy: str | None = None,
    ) -> None:
        if api not in API_CHOICES:
            raise BackendError(f"unknown api {api!r}: expected one of {', '.join(API_CHOICES)}")
        if not timeout_s > 0:
            raise BackendError(f"timeout must be > 0 seconds, got {timeout_s}")
        if concurrency < 1:
            raise BackendError(f"concurrency must be >= 1, got {concurrency}")
        self.url = url.rstrip("/")
        self.api = api
        self.timeout_s = timeout_s
        self.concurrency = concurrency
        self.policy = policy

    def run(self, workload: Workload, progress: bool = True) -> RunResult:
        check_workload(workload)
        return asyncio.run(self._run(workload, progress))

    # ------------------------------------------------------------------ run

    async def _run(self, workload: Workload, progress: bool) -> RunResult:
        self._records: list[RequestRecord] = []
        self._errors: list[str] = []
        self._abort = asyncio.Event()
        self._conn_failures = 0
        self._sem = asyncio.Semaphore(self.concurrency)
        self._vocab = int(workload.meta.get("vocab_size", 32000))
        self._bar = tqdm(total=workload.num_calls(), disable=not progress, unit="req", desc="replay")
        meta = {"backend": "http", "url": self.url, "api": self.api, "policy": self.policy,
                "timeout_s": self.timeout_s, "concurrency": self.concurrency}
        connector = aiohttp.TCPConnector(limit=self.concurrency)
        # No session-wide timeout (aiohttp's default is 5 minutes in total):
        # each request gets --timeout through asyncio.wait_for instead.
        async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=None)) as session:
            self._session = session
            problem = await self._check_health()
            if problem is not None:
                self._errors.append(problem)
                self._abort.set()
            info = None if problem is not None else await self._server_info()
            self._t0 = time.monotonic()
            self._wall_t0 = time.time()  # the server reports admission on its wall clock
            await asyncio.gather(*(self._run_program(p) for p in workload.programs))
        self._bar.close()
        meta["duration_s"] = time.monotonic() - self._t0
        records = sorted(self._records, key=lambda r: (r.t_sent, r.rid))
        partial = bool(self._errors) or any(not r.ok for r in records)
        return RunResult(records=records, partial=partial, errors=self._errors, meta=meta,
                         params=server_params(info, self.policy))

    async def _check_health(self) -> str | None:
        path = "/health" if self.api == "generate" else "/v1/models"
        try:
            async with self._session.get(self.url + path, timeout=aiohttp.ClientTimeout(total=HEALTH_TIMEOUT_S)) as r:
                if r.status != 200:
                    return f"server at {self.url} is not healthy: GET {path} returned HTTP {r.status}"
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as e:
            return f"server at {self.url} is unreachable: {type(e).__name__}: {e}"
        return None

    async def _server_info(self) -> dict | None:
        return await fetch_server_info(self._session, self.url)

    def _now(self) -> float:
        return time.monotonic() - self._t0

    async def _run_program(self, program: Program) -> None:
        delay = program.arrival - self._now()
        if delay > 0:
            try:
                await asyncio.wait_for(self._abort.wait(), timeout=delay)
            except asyncio.TimeoutError:
                pass
        futures: list[asyncio.Future] = [asyncio.get_running_loop().create_future() for _ in program.calls]
        # Calls are in topological order (check_workload), so each task only
        # waits on futures that an earlier task resolves.
        await asyncio.gather(*(self._run_call(program, i, futures) for i in range(len(program.calls))))

    async def _run_call(self, program: Program, index: int, futures: list[asyncio.Future]) -> None:
        call = program.calls[index]
        rid = f"{program.program_id}-{index}"
        parents: list[_Outcome] = [await futures[p] for p in call.parents]
        prompt = list(call.tokens)
        if call.extends_parent:
            first = parents[0]
            prompt = first.prompt_ids + first.output_ids + prompt

        def record(t_sent: float, error: str | None, reply: _Reply | None = None,
                   throttled: _Throttled | None = None) -> None:
            self._records.append(RequestRecord(
                rid=rid, client=program.client, program_id=program.program_id, call_index=index,
                well_behaved=program.well_behaved, t_sent=t_sent,
                t_first_token=reply.t_first_token if reply else None,
                t_done=self._now() if reply else None,
                prompt_tokens=reply.prompt_tokens if reply else len(prompt),
                cached_tokens=reply.cached_tokens if reply else None,
                output_tokens=reply.output_tokens if reply else 0,
                error=error, throttled=throttled is not None,
                retry_after_s=throttled.retry_after_s if throttled else None,
                progress=reply.progress if reply else None,
                **(reply.timing if reply else {}),
            ))
            self._bar.update(1)

        failed = [f"{program.program_id}-{p}" for p, o in zip(call.parents, parents) if not o.ok]
        if failed and not self._abort.is_set():
            record(self._now(), f"parent failed: {', '.join(failed)}")
            futures[index].set_result(_Outcome(ok=False))
            return
        async with self._sem:
            t_sent = self._now()
            if self._abort.is_set():
                record(t_sent, "run aborted: " + self._errors[0])
                futures[index].set_result(_Outcome(ok=False))
                return
            throttled = None
            try:
                headers = identity_headers(program.client, program, index)
                reply = await asyncio.wait_for(self._send(rid, program.client, call, prompt, headers),
                                               self.timeout_s)
            except asyncio.TimeoutError:
                error = f"timeout after {self.timeout_s:g}s"
            except _Throttled as e:
                throttled = e
                self._conn_failures = 0
                error = f"throttled: {e}"
            except _ServerError as e:
                error = f"server error: {e}"
            except (aiohttp.ClientError, OSError) as e:
                error = f"connection error: {type(e).__name__}: {e}"
                self._conn_failures += 1
                if self._conn_failures >= ABORT_AFTER_CONNECTION_FAILURES and not self._abort.is_set():
                    self._errors.append(f"server at {self.url} stopped answering ({self._conn_failures} "
                                        f"connection failures in a row; last: {error}); run aborted")
                    self._abort.set()
            except Exception as e:  # noqa: BLE001 - an odd reply must cost one record, not the run
                error = f"bad reply: {type(e).__name__}: {e}"
            else:
                self._conn_failures = 0
                record(t_sent, None, reply)
                futures[index].set_result(_Outcome(ok=True, prompt_ids=prompt, output_ids=reply.output_ids))
                return
        record(t_sent, error, throttled=throttled)
        futures[index].set_result(_Outcome(ok=False))

    # ---------------------------------------------------------------- wire

    async def _send(self, rid: str, client: str, call: Call, prompt: list[int], headers: dict[str, str]) -> _Reply:
        if self.api == "generate":
            return await self._send_generate(rid, client, call, prompt, headers)
        return await self._send_openai(rid, client, call, prompt, headers)

    def _stream(self, path: str, body: dict, headers: dict[str, str]):
        return sse_events(self._session, self.url + path, body, headers)

    async def _send_generate(self, rid: str, client: str, call: Call, prompt: list[int],
                             headers: dict[str, str]) -> _Reply:
        body = {
            "rid": rid,
            "input_ids": prompt,
            "routing_key": client,
            "stream": True,
            "sampling_params": {"max_new_tokens": call.max_new_tokens, "temperature": 0.0,
                                "ignore_eos": call.ignore_eos},
        }
        return await read_generate_stream(self._stream("/generate", body, headers), self._now, self._wall_t0,
                                          len(prompt))

    async def _send_openai(self, rid: str, client: str, call: Call, prompt: list[int],
                           headers: dict[str, str]) -> _Reply:
        body = {
            "model": "default",
            "prompt": prompt,
            "max_tokens": call.max_new_tokens,
            "temperature": 0.0,
            "user": client,
            "stream": True,
            "stream_options": {"include_usage": True},
            "ignore_eos": call.ignore_eos,
            "return_token_ids": True,
        }
        output_ids: list[int] = []
        usage: dict | None = None
        t_first = None
        saw_ids = False
        progress: list[list[float]] = []
        async for event in self._stream("/v1/completions", body, headers):
            for choice in event.get("choices") or []:
                ids = choice.get("token_ids")
                if ids:
                    saw_ids = True
                    output_ids.extend(ids)
                    progress.append([self._now(), len(output_ids)])
                if (ids or choice.get("text")) and t_first is None:
                    t_first = self._now()
            if event.get("usage"):
                usage = event["usage"]
        if usage is None:
            raise _ServerError("stream ended without usage (server ignored stream_options.include_usage)")
        n_out = int(usage.get("completion_tokens", len(output_ids)))
        if not saw_ids:
            output_ids = stand_in_output_ids(rid, n_out, self._vocab)
        details = usage.get("prompt_tokens_details") or {}
        return _Reply(
            output_ids=output_ids,
            prompt_tokens=int(usage.get("prompt_tokens", len(prompt))),
            output_tokens=n_out,
            cached_tokens=details.get("cached_tokens"),
            t_first_token=t_first,
            progress=progress if saw_ids else None,  # text chunks alone do not count tokens
        )
