"""A flooding tenant and light tenants against one live endpoint (a server, or a gateway in front of several).

The flooder sends ``flood`` requests sharing one long prefix (a unique tail
each, ``output`` new tokens), at most ``connections`` in flight. Each light
tenant first measures its idle latency alone (``idle_requests`` short
requests one after another), then, once the flood has taken the slots, sends
short requests one at a time, ``think_s`` apart, until the flood is answered.
A light tenant with ``chain`` > 1 sends chains of that many calls, each call's
prompt extending the previous one (a short agent chain); its latency is the
whole chain's.

Prompts are token ids, or with ``text`` plain lowercase text: the bundled
tiny model's tokenizer is byte-level, one token per character, so both give
the same token counts, and a gateway that routes on text sees the shared
prefix. Every request gets exactly one answer or the run raises.

Given a ``run_dir``, every request streams and is recorded as the replay
client records it (``RequestRecord``: admission time, output progress, dp
rank); ``run_flood`` then writes a run directory there (the flooder is the
misbehaving client) and holds it against the fairness bound of the server's
configuration (``bench audit``); ``Rep.audit`` keeps the verdict. Without
one, requests do not stream (streaming costs the server's HTTP and tokenizer
processes CPU, which a throughput comparison should not pay).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import string
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from sglang_fair.bench.audit import audit_fields
from sglang_fair.bench.http_backend import fetch_server_info, read_generate_stream, sse_events
from sglang_fair.bench.output import write_run
from sglang_fair.bench.server_params import server_params
from sglang_fair.metrics.service import ServiceWeights
from sglang_fair.runs.records import RequestRecord, RunResult

VOCAB = 1000  # token ids below the tiny model's vocabulary
FLOODER = "flooder"


@dataclass
class Shape:
    flood: int = 400
    connections: int = 64
    prefix: int = 512
    tail: int = 16
    output: int = 64
    light_tenants: int = 1
    light_input: int = 32
    light_output: int = 16
    chain: int = 1  # calls per light request (> 1: a chain, each call extending the last prompt)
    idle_requests: int = 8
    think_s: float = 0.5
    text: bool = False


@dataclass
class Rep:
    idle: dict[str, list[float]] = field(default_factory=dict)  # light tenant -> latencies alone, s
    flooded: dict[str, list[float]] = field(default_factory=dict)  # light tenant -> latencies beside the flood
    # light tenant -> time to the first token of each request beside the flood, s, as the server measured
    # it (servers run with --enable-metrics report it); the rest of a latency is decoding in a shared batch
    first_token: dict[str, list[float]] = field(default_factory=dict)
    makespan_s: float = 0.0
    flood_tokens: int = 0  # output tokens of the flood
    output_tokens: int = 0  # output tokens of every answer, the light tenants' too
    retracted: int = 0  # flood requests SGLang reports retracted (preempted) at least once
    prompt_tokens: int = 0
    cached_tokens: int = 0
    workers: dict[str, dict[int, int]] = field(default_factory=dict)  # client -> dp rank -> requests
    sent: int = 0
    answered: int = 0
    # bench audit's verdict on the run directory (audit_fields), when run_flood was given one
    audit: dict | None = None
    # How late this client's own event loop woke beside the flood, s: the client shares the machine's
    # cores with the servers, and a light request it sends late, or reads late, counts as latency.
    client_lag_max_s: float = 0.0

    @property
    def hit_rate(self) -> float:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


class Traffic:
    """Prompts of one repetition, as ids or text."""

    def __init__(self, shape: Shape, seed: int) -> None:
        self.shape, self.rng = shape, random.Random(seed)
        self.prefix = self.piece(shape.prefix)

    def piece(self, n: int) -> list[int] | str:
        if self.shape.text:
            return "".join(self.rng.choice(string.ascii_lowercase) for _ in range(n))
        return [self.rng.randrange(1, VOCAB) for _ in range(n)]

    def body(self, prompt: list[int] | str, out: int) -> dict:
        key = "text" if self.shape.text else "input_ids"
        return {key: prompt, "sampling_params": {"max_new_tokens": out, "ignore_eos": True}}


class _Recorder:
    """Every request of one repetition as a RequestRecord, times from the repetition's start."""

    def __init__(self) -> None:
        self.t0, self.wall_t0 = time.monotonic(), time.time()  # the server reports admission on its wall clock
        self.records: list[RequestRecord] = []

    def now(self) -> float:
        return time.monotonic() - self.t0


async def _generate(session: aiohttp.ClientSession, url: str, client: str, body: dict, rep: Rep,
                    recorder: _Recorder | None, program: str, call: int = 0) -> dict:
    """One request; with a ``recorder`` it streams (the audit needs every token's time) and is recorded."""
    rep.sent += 1
    # x-smg-routing-key too: SGLang's gateway passes on only that one (docs/gateway.md); smg names its
    # tenants by x-smg-tenant-id (when told to trust it) and puts a request in the class x-smg-priority
    # asks for, within its tenant's policy: the light tenants ask for interactive, the flood for nothing.
    headers = {"X-Client-Id": client, "x-smg-routing-key": client, "x-smg-tenant-id": client}
    if client != FLOODER:
        headers["x-smg-priority"] = "interactive"
    if recorder is None:
        async with session.post(url + "/generate", json=body, headers=headers) as resp:
            reply = await resp.json(content_type=None)
            if resp.status != 200:
                raise RuntimeError(f"{client}: HTTP {resp.status}: {reply}")
        meta = reply["meta_info"]
        output_tokens, prompt_tokens = meta.get("completion_tokens", 0), meta.get("prompt_tokens", 0)
        cached = meta.get("cached_tokens")
    else:
        t_sent = recorder.now()
        try:
            streamed = await read_generate_stream(
                sse_events(session, url + "/generate", {**body, "stream": True}, headers), recorder.now,
                recorder.wall_t0, len(body.get("input_ids") or body.get("text") or ""))
        except Exception as e:
            raise RuntimeError(f"{client}: {e}") from e
        meta = streamed.meta
        output_tokens, prompt_tokens, cached = streamed.output_tokens, streamed.prompt_tokens, streamed.cached_tokens
        recorder.records.append(RequestRecord(
            rid=f"{program}-{call}", client=client, program_id=program, call_index=call,
            well_behaved=client != FLOODER, t_sent=t_sent, t_first_token=streamed.t_first_token,
            t_done=recorder.now(), prompt_tokens=prompt_tokens, cached_tokens=cached, output_tokens=output_tokens,
            progress=streamed.progress, **streamed.timing))
    rep.answered += 1
    rep.output_tokens += output_tokens
    rep.prompt_tokens += prompt_tokens
    rep.cached_tokens += cached or 0
    if isinstance(meta.get("dp_rank"), int):
        ranks = rep.workers.setdefault(client, {})
        ranks[meta["dp_rank"]] = ranks.get(meta["dp_rank"], 0) + 1
    return meta


async def _light(session, url: str, traffic: Traffic, client: str, rep: Rep, recorder: _Recorder | None, count: int,
                 until: asyncio.Event | None) -> list[float]:
    shape, latencies = traffic.shape, []
    while (until is None and len(latencies) < count) or (until is not None and not until.is_set()):
        prompt = traffic.piece(shape.light_input)
        program = f"{client}-{'flooded' if until is not None else 'idle'}-{len(latencies)}"
        start = time.perf_counter()
        for call in range(shape.chain):
            meta = await _generate(session, url, client, traffic.body(prompt, shape.light_output), rep, recorder,
                                   program, call)
            if call == 0 and until is not None and "first_token_latency" in meta:
                rep.first_token.setdefault(client, []).append(meta["first_token_latency"])
            prompt = prompt + traffic.piece(shape.light_input)
        latencies.append(time.perf_counter() - start)
        if until is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(until.wait(), shape.think_s)
    return latencies


async def run_flood(url: str, shape: Shape, seed: int, run_dir: Path | None = None) -> Rep:
    """Idle light latencies, then the flood with the light tenants beside it; with ``run_dir``, the
    repetition's run directory is written there and audited (``Rep.audit``)."""
    # Streaming every token costs the server's HTTP and tokenizer processes: only when auditing.
    rep, traffic, recorder = Rep(), Traffic(shape, seed), _Recorder() if run_dir is not None else None
    lights = [f"light-{i}" for i in range(shape.light_tenants)]
    tails = [traffic.piece(shape.tail) for _ in range(shape.flood)]
    # One connection per request: a kept-alive one the server closes while idle would fail the next request.
    connector = aiohttp.TCPConnector(limit=0, force_close=True)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=3600), connector=connector) as session:
        for client in lights:
            rep.idle[client] = await _light(session, url, traffic, client, rep, recorder, shape.idle_requests, None)
        gate = asyncio.Semaphore(shape.connections)

        async def one(n: int, tail) -> int:
            async with gate:
                body = traffic.body(traffic.prefix + tail, shape.output)
                meta = await _generate(session, url, FLOODER, body, rep, recorder, f"{FLOODER}-{n}")
                rep.retracted += (meta.get("num_retractions") or 0) > 0
                return meta["completion_tokens"]

        done = asyncio.Event()
        start = time.perf_counter()
        lag = asyncio.create_task(_loop_lag(rep, done))
        flood = [asyncio.create_task(one(n, tail)) for n, tail in enumerate(tails)]
        await asyncio.sleep(1.0)  # the flood takes every slot first
        light = {client: asyncio.create_task(_light(session, url, traffic, client, rep, recorder, 0, done))
                 for client in lights}
        rep.flood_tokens = sum(await asyncio.gather(*flood))
        rep.makespan_s = time.perf_counter() - start
        done.set()
        await lag
        for client, task in light.items():
            rep.flooded[client] = await task
        if recorder is not None and run_dir is not None:
            params = server_params(await fetch_server_info(session, url), None)
            rep.audit = _write_and_audit(run_dir, recorder, params, [FLOODER, *lights], url)
    return rep


async def _loop_lag(rep: Rep, stop: asyncio.Event, every_s: float = 0.02) -> None:
    """Until ``stop``: the largest delay of this event loop's wake-ups past their time, into ``rep``."""
    while not stop.is_set():
        due = time.perf_counter() + every_s
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), every_s)
        rep.client_lag_max_s = max(rep.client_lag_max_s, time.perf_counter() - due)


def _write_and_audit(run_dir: Path, recorder: _Recorder, params: dict, clients: list[str], url: str) -> dict:
    """Write the repetition's run directory (no figures) and return bench audit's verdict on it."""
    records = sorted(recorder.records, key=lambda r: (r.t_sent, r.rid))
    result = RunResult(records=records, meta={"backend": "http", "url": url, "duration_s": recorder.now()},
                       params=params)
    write_run(Path(run_dir), result, {"backend": "http", "scenario_name": "open flood", "policy": params.get("policy")},
              {c: c != FLOODER for c in clients}, ServiceWeights(), plots=False)
    return audit_fields(Path(run_dir)) | {"run_dir": str(run_dir)}


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def pooled(latencies: dict[str, list[float]]) -> list[float]:
    """Every light tenant's latencies in one list."""
    return [x for values in latencies.values() for x in values]


def check_line(label: str, value: float, target: float, op: str) -> str:
    """One target's verdict, as the benchmarks print it (``op``: "<=" or ">=")."""
    ok = value <= target if op == "<=" else value >= target
    return f"{label}: {value:.2f} vs target {op} {target}: {'PASS' if ok else 'FAIL'}"


def positive_int(text: str) -> int:
    """An argparse type: an integer > 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def add_flood_options(parser: argparse.ArgumentParser, systems: Sequence[str],
                      default: Sequence[str] | None = None) -> None:
    """The options every flood experiment on the real server takes (``benchmarks/experiments/``)."""
    parser.add_argument("--reps", type=positive_int, default=3)
    parser.add_argument("--flood", type=positive_int, default=Shape.flood, help="flood requests per repetition")
    parser.add_argument("--think", type=float, default=Shape.think_s,
                        help="light tenants' pause between an answer and their next request beside the flood, s")
    parser.add_argument("--systems", nargs="+", default=list(default or systems), choices=list(systems))
    parser.add_argument("--json", help="write the results as JSON here")
    parser.add_argument("--plot", help="write a PNG here")
    parser.add_argument("--log-dir", type=Path, help="where the servers' logs go (default: a new temporary directory)")


def server_log_dir(args: argparse.Namespace, prefix: str) -> Path:
    """``--log-dir``, created, or a new temporary directory named ``prefix...``."""
    path = args.log_dir or Path(tempfile.mkdtemp(prefix=prefix))
    path.mkdir(parents=True, exist_ok=True)
    return path
