"""The routers of ``sglang_fair.router`` inside SGLang's data-parallel controller.

``register_hooks()`` (called by the plugin entry point in every SGLang
process) makes ``--load-balance-method d2lpm`` (or ``per_client_round_robin``,
``shortest_queue``, ``preble``, ``cache_aware``) work on stock
``python -m sglang.launch_server --dp N``. ``round_robin`` stays SGLang's own.

Hooks:

* AFTER ``ServerArgs.add_cli_args``: the methods join ``--load-balance-method``'s
  choices; ``--fair-router-quantum`` (Q^w) and ``--fair-router-options`` (JSON
  of any router option) are added.
* BEFORE ``ServerArgs.from_cli_args``: the router is built once to validate
  the options (bad ones stop the launch with a message), KV events are turned
  on unless the user configured them (publishers connect to loopback ports
  the controller binds), and the configuration is exported in
  ``SGLANG_FAIR_ROUTER_CONFIG`` for the spawned controller.
* AROUND ``LoadBalanceMethod.from_str``: our names resolve to ``ROUND_ROBIN``
  so the stock controller initialises; its dispatch is then replaced.
* AROUND ``DataParallelController.__init__``: before the schedulers are
  spawned, bind the completion side channel (an IPC PULL socket whose address
  the schedulers inherit in ``SGLANG_FAIR_ROUTER_FEEDBACK``) and one KV event
  SUB socket per rank (bound where the publishers connect, or connected to
  the publishers the user configured).
* AROUND ``DataParallelController.event_loop``: poll the tokenizer, the side
  channel and the KV event sockets together (no busy loop), watch the
  scheduler processes, warn about workers that stop reporting.
* AFTER ``Scheduler.__init__``: the scheduler announces its pid for its rank,
  so the controller can watch it.
* AFTER ``SchedulerOutputStreamer.stream_output`` and
  ``Scheduler.send_abort_output`` (in each scheduler): push ``(rid, client,
  output tokens)`` of finished, rejected or aborted requests to the
  controller, non-blocking (a full queue drops the report and counts it, it
  never stalls the worker).

A scheduler process that dies: the router stops routing to it and drops its
cache entries, and every request in flight on it (queued or running) gets one
explicit error (finish reason ``abort``, status 503) from the controller; a
late report from it is ignored. Requests are not re-dispatched, because the
router cannot know whether one had already streamed tokens to its client.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import socket
import sys
import time
import uuid

import msgspec
import psutil
import zmq
from sglang.srt.plugins.hook_registry import HookRegistry, HookType

from sglang_fair.core.clients import normalize_client_id
from sglang_fair.core.options import json_object
from sglang_fair.router import ROUTERS, NoLiveWorkerError, Router, make_router

logger = logging.getLogger(__name__)

# Names SGLang already has keep SGLang's implementation.
STOCK_METHODS = ("round_robin",)
FAIR_METHODS = tuple(name for name in ROUTERS if name not in STOCK_METHODS)
CONFIG_ENV = "SGLANG_FAIR_ROUTER_CONFIG"
FEEDBACK_ENV = "SGLANG_FAIR_ROUTER_FEEDBACK"
KV_PORT_ENV = "SGLANG_FAIR_ROUTER_KV_PORT"  # first of N consecutive ports; default: random free range

POLL_MS = 50
LIVENESS_EVERY_S = 0.5
SILENT_WORKER_WARN_S = 60.0
HELLO_WAIT_S = 30.0  # schedulers announce themselves while the controller starts

_DPC = "sglang.srt.managers.data_parallel_controller"
_SCHEDULER = "sglang.srt.managers.scheduler.Scheduler"
# Every output a scheduler sends for a request goes through here (batch results,
# and requests rejected before running); aborts of queued requests do not.
_STREAMER = "sglang.srt.managers.scheduler_components.output_streamer.SchedulerOutputStreamer.stream_output"


def register_hooks() -> None:
    hooks = [
        ("sglang.srt.server_args.ServerArgs.add_cli_args", extend_cli, HookType.AFTER),
        ("sglang.srt.server_args.ServerArgs.from_cli_args", prepare_router_args, HookType.BEFORE),
        (f"{_DPC}.LoadBalanceMethod.from_str", resolve_method, HookType.AROUND),
        (f"{_DPC}.DataParallelController.__init__", init_controller, HookType.AROUND),
        (f"{_DPC}.DataParallelController.event_loop", run_event_loop, HookType.AROUND),
        (f"{_SCHEDULER}.__init__", announce_worker, HookType.AFTER),
        (_STREAMER, report_finished, HookType.AFTER),
        (f"{_SCHEDULER}.send_abort_output", report_aborted, HookType.AFTER),
    ]
    for target, hook, kind in hooks:
        HookRegistry.register(target, hook, kind)


# ---- launcher side: CLI and validation ---------------------------------------------


def extend_cli(result, parser: argparse.ArgumentParser, *args, **kwargs):
    for action in parser._actions:
        if "--load-balance-method" in action.option_strings and action.choices is not None:
            action.choices = list(action.choices) + [m for m in FAIR_METHODS if m not in action.choices]
    if not any("--fair-router-quantum" in a.option_strings for a in parser._actions):
        group = parser.add_argument_group("sglang-fair router", "Data-parallel routing (D2LPM and baselines)")
        group.add_argument("--fair-router-quantum", type=float, default=None,
                           help="D2LPM worker quantum Q^w (default: the router's own).")
        group.add_argument("--fair-router-options", type=str, default=None,
                           help='JSON object of router options, e.g. \'{"index_capacity_tokens": 2000000}\'.')
    return result


def router_config(method: str, quantum: float | None, options_json: str | None) -> dict:
    """The router configuration from the CLI values; raises ValueError naming the bad option."""
    options = json_object(options_json, "--fair-router-options") if options_json else {}
    if quantum is not None:
        options["quantum"] = quantum
    return {"method": method, "options": options}


def prepare_router_args(cls, args: argparse.Namespace, *rest, **kwargs):
    """BEFORE ``ServerArgs.from_cli_args``: validate, export, and turn on KV events.

    ServerArgs is read-only once resolved, so the KV event publishers are
    configured here, on the parsed arguments: each rank's publisher connects
    to ``127.0.0.1:<port + rank>``, where the controller will bind.
    """
    method = getattr(args, "load_balance_method", None)
    if method not in FAIR_METHODS:
        return None
    try:
        config = router_config(method, getattr(args, "fair_router_quantum", None),
                               getattr(args, "fair_router_options", None))
        dp_size = max(1, int(getattr(args, "dp_size", 1) or 1))
        make_router(method, dp_size, **config["options"])
        if not getattr(args, "kv_events_config", None):
            config["kv_port"] = _pick_kv_ports(dp_size)
            args.kv_events_config = json.dumps(
                {"publisher": "zmq", "endpoint": f"tcp://127.0.0.1:{config['kv_port']}", "bind": False, "topic": ""}
            )
    except (ValueError, TypeError, RuntimeError) as exc:
        sys.exit(f"sglang-fair: error: --load-balance-method {method}: {exc}")
    os.environ[CONFIG_ENV] = json.dumps(config)
    return None


def _pick_kv_ports(count: int) -> int:
    """First of ``count`` consecutive free loopback ports ($SGLANG_FAIR_ROUTER_KV_PORT if set)."""
    fixed = os.environ.get(KV_PORT_ENV)
    if fixed:
        try:
            return int(fixed)
        except ValueError:
            raise ValueError(f"{KV_PORT_ENV} must be a port number, got {fixed!r}") from None
    for _ in range(50):
        base = random.randrange(20000, 60000 - count)
        if all(_port_free(base + i) for i in range(count)):
            return base
    raise RuntimeError(f"no {count} consecutive free ports for KV events; set {KV_PORT_ENV}")


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def resolve_method(original, cls, method: str):
    if isinstance(method, str) and method.lower() in FAIR_METHODS:
        return cls.ROUND_ROBIN  # placeholder: init_controller swaps the dispatch
    return original(cls, method)


# ---- controller side -----------------------------------------------------------------


def init_controller(original, controller, server_args, port_args, *args, **kwargs):
    from sglang.srt.runtime_context import get_parallel

    parallel = get_parallel()
    method = parallel.load_balance_method
    if method not in FAIR_METHODS:
        return original(controller, server_args, port_args, *args, **kwargs)
    if parallel.attn_dp_enabled:
        raise ValueError(f"--load-balance-method {method} needs plain data parallelism, not DP attention")
    binding = RouterBinding.create(method, parallel.num_dp_ranks, server_args)
    try:
        original(controller, server_args, port_args, *args, **kwargs)
    except BaseException:
        binding.close()
        raise
    binding.attach(controller, port_args)
    controller._fair_router = binding
    logger.info("sglang-fair: data-parallel routing with %s over %d workers", method, parallel.num_dp_ranks)


def run_event_loop(original, controller, *args, **kwargs):
    binding = getattr(controller, "_fair_router", None)
    if binding is None:
        return original(controller, *args, **kwargs)
    return binding.serve()


def _load_config(method: str) -> dict:
    raw = os.environ.get(CONFIG_ENV)
    config = json.loads(raw) if raw else {"method": method, "options": {}}
    if config.get("method") != method:
        config = {"method": method, "options": {}}
    return config


class RouterBinding:
    """The router, its feedback sockets and the controller it dispatches for."""

    def __init__(self, router: Router, context: zmq.Context, feedback: zmq.Socket, kv: list[zmq.Socket]) -> None:
        from sglang_fair.binding.kv_events import KVEventTracker

        self.router = router
        self.context = context
        self.feedback = feedback
        self.kv_sockets = kv
        self.tracker = KVEventTracker(router, router.num_workers)
        self.decoder = msgspec.msgpack.Decoder()
        self.controller = None
        self.to_tokenizer: zmq.Socket | None = None
        self.reply_route: dict[str, object] = {}  # rid -> http_worker_ipc, to send errors back
        self.worker_pids: dict[int, set[int]] = {}  # rank -> scheduler pids, from their hello
        now = time.monotonic()
        self.last_report = [now] * router.num_workers
        self.last_warned = [0.0] * router.num_workers
        self.started = now
        self.unannounced_warned = False
        self.unrouted = 0
        self.kv_seen: set[int] = set()

    @classmethod
    def create(cls, method: str, num_workers: int, server_args) -> RouterBinding:
        config = _load_config(method)
        router = make_router(method, num_workers, **config["options"])
        context = zmq.Context.instance()
        feedback = context.socket(zmq.PULL)
        name = f"sglang_fair_router_{os.getpid()}_{uuid.uuid4().hex[:8]}"
        # Linux abstract socket: no file is left behind when the server is killed.
        endpoint = f"ipc://@{name}" if sys.platform == "linux" else f"ipc:///tmp/{name}"
        feedback.bind(endpoint)
        os.environ[FEEDBACK_ENV] = endpoint  # inherited by the schedulers spawned next
        kv: list[zmq.Socket] = []
        if "kv_port" in config:
            kv = _bind_kv_sockets(context, int(config["kv_port"]), num_workers)
        elif getattr(server_args, "kv_events_config", None):
            kv = _subscribe_user_kv_events(context, server_args.kv_events_config, num_workers)
        else:
            logger.warning("sglang-fair router: no KV events configured; the index learns from dispatches only")
        return cls(router, context, feedback, kv)

    def attach(self, controller, port_args) -> None:
        from sglang.srt.utils.network import get_zmq_socket

        self.controller = controller
        controller.dispatching = self.dispatch
        self.to_tokenizer = get_zmq_socket(self.context, zmq.PUSH, port_args.tokenizer_ipc_name, False)

    def close(self) -> None:
        for sock in [self.feedback, *self.kv_sockets]:
            sock.close(linger=0)

    # ---- dispatch ---------------------------------------------------------------

    def dispatch(self, req) -> None:
        from sglang.srt.managers.io_struct import sock_send

        controller = self.controller
        if controller.maybe_external_dp_rank_routing(req):
            return
        rid = req.rid
        client = normalize_client_id(getattr(req, "routing_key", None))
        tokens = list(getattr(req, "input_ids", None) or [])
        sampling = getattr(req, "sampling_params", None)
        max_new = getattr(sampling, "max_new_tokens", None) or 0
        try:
            worker = self.router.route(rid, client, tokens, int(max_new))
        except NoLiveWorkerError as exc:
            self.reply_error(rid, getattr(req, "http_worker_ipc", None), str(exc))
            return
        except Exception:
            # Never lose a request to a router bug: place it on a live worker untracked.
            logger.exception("sglang-fair router: route() failed for %r; sending it round-robin", rid)
            worker = self._fallback_worker()
            if worker is None:
                self.reply_error(rid, getattr(req, "http_worker_ipc", None), "no live data-parallel worker")
                return
            self.unrouted += 1
        else:
            self.reply_route[rid] = getattr(req, "http_worker_ipc", None)
        sock_send(controller.workers[worker], req)

    def _fallback_worker(self) -> int | None:
        live = [w for w in range(self.router.num_workers) if self.router.alive[w]]
        return random.choice(live) if live else None

    def reply_error(self, rid: str, http_worker_ipc, message: str) -> None:
        from sglang.srt.managers.io_struct import AbortReq, sock_send

        abort = AbortReq(
            rid=rid,
            finished_reason={"type": "abort", "message": message, "status_code": 503},
            abort_message=message,
        )
        if http_worker_ipc is not None:
            abort.http_worker_ipc = http_worker_ipc
        sock_send(self.to_tokenizer, abort)

    # ---- the loop -----------------------------------------------------------------

    def serve(self) -> None:
        from sglang.srt.managers.io_struct import sock_recv

        controller = self.controller
        poller = zmq.Poller()
        poller.register(controller.recv_from_tokenizer, zmq.POLLIN)
        poller.register(self.feedback, zmq.POLLIN)
        for sock in self.kv_sockets:
            poller.register(sock, zmq.POLLIN)
        next_check = time.monotonic()
        while True:
            controller.soft_watchdog.feed()
            poller.poll(POLL_MS)
            while True:
                try:
                    recv_req = sock_recv(controller.recv_from_tokenizer, flags=zmq.NOBLOCK)
                except zmq.ZMQError:
                    break
                controller._request_dispatcher(recv_req)
            self.drain_feedback()
            self.drain_kv_events()
            now = time.monotonic()
            if now >= next_check:
                next_check = now + LIVENESS_EVERY_S
                self.check_workers(now)

    def drain_feedback(self) -> None:
        while True:
            try:
                raw = self.feedback.recv(flags=zmq.NOBLOCK)
            except zmq.Again:
                return
            self.handle_feedback(raw)

    def handle_feedback(self, raw: bytes) -> None:
        """``("hello", rank, pid)`` from a starting scheduler, ``("done", rank, [(rid, client, out)])``,
        ``("beat", rank, 0)`` from one busy with long requests."""
        try:
            kind, rank, payload = self.decoder.decode(raw)
            rank = int(rank)
            if kind == "hello":
                pid = int(payload)
            elif kind == "done":
                reports = [(str(rid), int(out)) for rid, _client, out in payload]
            elif kind == "beat":
                reports = []
            else:
                raise ValueError(kind)
        except (msgspec.DecodeError, TypeError, ValueError):
            logger.warning("sglang-fair router: malformed worker report ignored")
            return
        if not 0 <= rank < self.router.num_workers:
            logger.warning("sglang-fair router: report from unknown worker %s ignored", rank)
            return
        self.last_report[rank] = time.monotonic()
        if kind == "hello":
            self.worker_pids.setdefault(rank, set()).add(pid)
            return
        for rid, out in reports:
            self.reply_route.pop(rid, None)
            self.router.on_finish(rid, rank, out)

    def drain_kv_events(self) -> None:
        for rank, sock in enumerate(self.kv_sockets):
            while True:
                try:
                    frames = sock.recv_multipart(flags=zmq.NOBLOCK)
                except zmq.Again:
                    break
                if self.router.alive[rank]:
                    if rank not in self.kv_seen:
                        self.kv_seen.add(rank)
                        logger.info("sglang-fair router: receiving KV events from worker %d", rank)
                    self.tracker.handle_frames(rank, frames)

    def check_workers(self, now: float) -> None:
        router = self.router
        for rank, pids in self.worker_pids.items():
            if router.alive[rank] and not all(self._pid_alive(pid) for pid in pids):
                self.worker_died(rank)
        missing = [r for r in range(router.num_workers) if r not in self.worker_pids]
        if missing and not self.unannounced_warned and now - self.started > HELLO_WAIT_S:
            self.unannounced_warned = True
            logger.warning(
                "sglang-fair router: workers %s never reported (side channel %s unreachable, e.g. Ray actors "
                "or other nodes?): their deaths go unnoticed and their queue sizes only grow",
                missing, os.environ.get(FEEDBACK_ENV),
            )
        for rank in range(router.num_workers):
            silent = now - self.last_report[rank]
            if router.alive[rank] and router.queue_sizes[rank] > 0 and silent > SILENT_WORKER_WARN_S:
                if now - self.last_warned[rank] > SILENT_WORKER_WARN_S:
                    self.last_warned[rank] = now
                    logger.warning(
                        "sglang-fair router: worker %d has %d requests in flight and has not run a batch for %.0f s",
                        rank, router.queue_sizes[rank], silent,
                    )

    def _pid_alive(self, pid: int) -> bool:
        for proc in self.controller.scheduler_procs:
            if proc is not None and proc.pid == pid:
                return proc.is_alive()  # our child: also reaps it
        try:
            return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    def worker_died(self, rank: int) -> None:
        lost = self.router.on_worker_down(rank)
        self.tracker.forget_worker(rank)
        controller = self.controller
        controller.status[rank] = False
        controller._refresh_active_workers()
        logger.error("sglang-fair router: worker %d died; failing its %d requests in flight", rank, len(lost))
        for rid in lost:
            self.reply_error(rid, self.reply_route.pop(rid, None), f"data-parallel worker {rank} died")


def _bind_kv_sockets(context: zmq.Context, base: int, num_workers: int) -> list[zmq.Socket]:
    """SUB sockets on ``base + rank``, where the ranks' publishers connect."""
    socks: list[zmq.Socket] = []
    try:
        for rank in range(num_workers):
            sock = context.socket(zmq.SUB)
            socks.append(sock)
            sock.setsockopt(zmq.SUBSCRIBE, b"")
            sock.setsockopt(zmq.RCVHWM, 100_000)
            sock.bind(f"tcp://127.0.0.1:{base + rank}")
    except zmq.ZMQError as exc:
        for sock in socks:
            sock.close(linger=0)
        raise RuntimeError(f"sglang-fair router: cannot bind KV event port {base + len(socks) - 1}: {exc}") from None
    return socks


def _subscribe_user_kv_events(context: zmq.Context, config_json: str, num_workers: int) -> list[zmq.Socket]:
    """Follow KV events the user already configured (tcp publishers that bind)."""
    try:
        config = json.loads(config_json)
    except json.JSONDecodeError:
        config = {}
    endpoint = str(config.get("endpoint", ""))
    if config.get("publisher") != "zmq" or not endpoint.startswith("tcp://") or config.get("bind") is False:
        logger.warning("sglang-fair router: cannot follow --kv-events-config %s; routing without eviction feedback",
                       config_json)
        return []
    host, _, port = endpoint[len("tcp://"):].rpartition(":")
    if host in ("*", "0.0.0.0", "::", "[::]"):
        host = "127.0.0.1"
    socks = []
    for rank in range(num_workers):
        sock = context.socket(zmq.SUB)
        sock.setsockopt(zmq.SUBSCRIBE, str(config.get("topic", "")).encode())
        sock.connect(f"tcp://{host}:{int(port) + rank}")
        socks.append(sock)
    return socks


# ---- scheduler side: the completion side channel ----------------------------------

_sender: zmq.Socket | None | bool = False  # False: not looked up yet in this process
_dropped = 0
_last_sent = 0.0
HEARTBEAT_S = 5.0  # a worker running batches reports at least this often


def _feedback_sender() -> zmq.Socket | None:
    global _sender
    if _sender is False:
        endpoint = os.environ.get(FEEDBACK_ENV)
        _sender = None
        if endpoint:
            from sglang.srt.runtime_context import get_parallel

            parallel = get_parallel()
            # One report per DP rank: from its first TP rank of the last PP stage.
            if getattr(parallel, "tp_rank", 0) == 0 and getattr(parallel, "pp_rank", 0) == getattr(parallel, "pp_size", 1) - 1:
                sock = zmq.Context.instance().socket(zmq.PUSH)
                sock.setsockopt(zmq.SNDHWM, 100_000)
                sock.setsockopt(zmq.LINGER, 0)
                sock.connect(endpoint)
                _sender = sock
    return _sender


def _send(kind: str, payload: object) -> bool:
    """Push one report to the controller without ever blocking; False if dropped."""
    sock = _feedback_sender()
    if sock is None:
        return True
    from sglang.srt.runtime_context import get_parallel

    global _last_sent
    rank = get_parallel().dp_rank or 0
    try:
        sock.send(msgspec.msgpack.encode((kind, rank, payload)), flags=zmq.NOBLOCK)
    except zmq.Again:
        return False
    _last_sent = time.monotonic()
    return True


def _send_reports(items: list[tuple[str, str, int]]) -> None:
    global _dropped
    if items and not _send("done", items):
        _dropped += len(items)
        if _dropped == len(items) or _dropped % 10_000 < len(items):
            logger.warning("sglang-fair: router feedback queue full, %d completion reports dropped", _dropped)


def announce_worker(result, scheduler, *args, **kwargs):
    """AFTER ``Scheduler.__init__``: tell the router which process serves this rank."""
    if _feedback_sender() is not None:
        _send("hello", os.getpid())
    return result


def _report(req) -> tuple[str, str, int] | None:
    if getattr(req, "_fair_router_reported", False):
        return None
    req._fair_router_reported = True
    return (req.rid, normalize_client_id(getattr(req, "routing_key", None)), len(getattr(req, "output_ids", ()) or ()))


def report_finished(result, streamer, reqs, *args, **kwargs):
    if reqs and _feedback_sender() is not None:
        items = [r for r in (_report(req) for req in reqs if req.finished()) if r is not None]
        if items:
            _send_reports(items)
        elif time.monotonic() - _last_sent > HEARTBEAT_S:
            _send("beat", 0)  # busy with long requests: still alive
    return result


def report_aborted(result, scheduler, abort_req, req, *args, **kwargs):
    if req is not None and _feedback_sender() is not None:
        item = _report(req)
        if item is not None:
            _send_reports([item])
    return result
