"""The routers of ``sglang_fair.router`` inside SGLang's data-parallel controller.

Its hooks (listed in ``binding/hooks.py``, registered by the plugin entry
point in every SGLang process) make ``--load-balance-method d2lpm`` (or ``per_client_round_robin``,
``shortest_queue``, ``preble``, ``cache_aware``) work on stock
``python -m sglang.launch_server --dp N``, with the process backend or Ray's
(``--use-ray``, see ``ray/backend.py``). ``round_robin`` stays SGLang's own. The
command line is ``http/router_options.py``'s, the workers' reports
``scheduler/router_reports.py``'s; this module is the controller side (its
sockets: ``router_sockets``; telling dead workers: ``worker_liveness``):

* AROUND ``LoadBalanceMethod.from_str``: our names resolve to ``ROUND_ROBIN``
  so the stock controller initialises; its dispatch is then replaced.
* AROUND ``DataParallelController.__init__``: before the schedulers start,
  bind the completion side channel (a PULL socket whose address the
  schedulers find in their settings) and one KV event SUB
  socket per rank (bound where the publishers connect, or connected to the
  publishers the user configured).
* AROUND ``DataParallelController.event_loop``: poll the tokenizer, the side
  channel and the KV event sockets together (no busy loop), watch the
  workers, warn about workers that stop reporting.
* SGLang 0.5.21's controller process does not load plugins, so none of the
  above would apply in it: AROUND ``Engine._launch_scheduler_processes``,
  ``controller_process_loads_plugins`` has the launch spawn
  ``run_controller_with_plugins`` (which loads them, then runs SGLang's
  ``run_data_parallel_controller_process``) for the duration of the launch.

A worker that dies (its scheduler process exits; under Ray, its actor's event
loop ends): the router stops routing to it and drops its cache entries, and
every request in flight on it (queued or running) gets one explicit error
(finish reason ``abort``, status 503) from the controller; a late report from
it is ignored. Requests are not re-dispatched, because the router cannot know
whether one had already streamed tokens to its client. ``attach`` guards the
controller's sockets to its workers (``worker_sockets``), so that nothing
blocks on a dead worker before its death is detected; requests sent untracked
(``routed_dp_rank``, a router failure) are failed with the others.

Routers that hold requests (``Router.holds_requests``, late binding): a
request the router keeps (``route`` returns None) stays in the controller
until the router places it; after every call into the router (a dispatch, a
worker's report, an abort, a worker's death) the controller sends what
``take_released`` returns. An abort for a held request withdraws it from the
router (``cancel``) and answers it here, once; the abort still goes to the
workers for the requests they have. When every worker is dead the held
requests get the same 503 error as those in flight.
"""

from __future__ import annotations

import logging
import os
import random
import time

import msgspec
import zmq

from sglang_fair.binding.common import settings, worker_reports, worker_status
from sglang_fair.binding.common.attached_state import attach, attached
from sglang_fair.binding.common.request_identity import client_of
from sglang_fair.binding.common.router_channels import FAIR_METHODS
from sglang_fair.binding.common.settings import ADMIN_SETTINGS_KEY, RouterSettings
from sglang_fair.binding.common.sglang_fields import data_parallel
from sglang_fair.binding.controller import router_sockets
from sglang_fair.binding.controller.dead_rank_answers import DeadRankAnswers
from sglang_fair.binding.controller.worker_liveness import ProcessLiveness, RayLiveness, WorkerLiveness, loops_per_rank
from sglang_fair.binding.controller.worker_sockets import WorkerSocket, guard_worker_sockets
from sglang_fair.core import OptionError, SettingsUpdate
from sglang_fair.router import NoLiveWorkerError, Router, make_router

logger = logging.getLogger(__name__)

POLL_MS = 50
LIVENESS_EVERY_S = 0.5


def controller_process_loads_plugins(original, cls, *args, **kwargs):
    """SGLang 0.5.21: its launch spawns the name ``engine.run_data_parallel_controller_process``
    (pickled by reference); for this launch that name is ours."""
    from sglang.srt.entrypoints import engine

    stock = engine.run_data_parallel_controller_process
    engine.run_data_parallel_controller_process = run_controller_with_plugins
    try:
        return original(cls, *args, **kwargs)
    finally:
        engine.run_data_parallel_controller_process = stock


def run_controller_with_plugins(*args, **kwargs) -> None:
    """The data-parallel controller process's entry point on SGLang 0.5.21."""
    from sglang.srt.managers import data_parallel_controller
    from sglang.srt.plugins import load_plugins

    load_plugins()
    data_parallel_controller.run_data_parallel_controller_process(*args, **kwargs)


def resolve_method(original, cls, method: str):
    """AROUND ``LoadBalanceMethod.from_str``: our names resolve to ``ROUND_ROBIN`` so the stock
    controller initialises; ``init_controller`` then replaces its dispatch."""
    if isinstance(method, str) and method.lower() in FAIR_METHODS:
        return cls.ROUND_ROBIN  # placeholder: the controller binding swaps the dispatch
    return original(cls, method)


def init_controller(original, controller, server_args, port_args, *args, **kwargs):
    from sglang.srt.runtime_context import get_parallel

    parallel = get_parallel()
    method = parallel.load_balance_method
    if method not in FAIR_METHODS:
        return original(controller, server_args, port_args, *args, **kwargs)
    ranks, dp_attention = data_parallel(parallel)
    if dp_attention:
        raise ValueError(f"--load-balance-method {method} needs plain data parallelism, not DP attention")
    binding = RouterBinding.create(method, ranks, server_args)
    try:
        original(controller, server_args, port_args, *args, **kwargs)
    except BaseException:
        binding.close()
        raise
    binding.attach(controller, port_args)
    attach(controller, binding)
    logger.info("sglang-fair: data-parallel routing with %s over %d workers", method, ranks)


def run_event_loop(original, controller, *args, **kwargs):
    binding = attached(controller, RouterBinding)
    if binding is None:
        return original(controller, *args, **kwargs)
    return binding.serve()


class RouterBinding:
    """The router, its feedback sockets and the controller it dispatches for."""

    def __init__(self, router: Router, context: zmq.Context, feedback: zmq.Socket, kv: list[zmq.Socket]) -> None:
        from sglang_fair.binding.controller.kv_events import KVEventTracker

        self.router = router
        self.context = context
        self.feedback = feedback
        self.kv_sockets = kv
        self.tracker = KVEventTracker(router, router.num_workers)
        self.controller = None
        self.to_tokenizer: zmq.Socket | None = None
        self.reply_route: dict[str, object] = {}  # rid -> http_worker_ipc, to send errors back
        self.held: dict[str, object] = {}  # rid -> request the router holds (late binding), not yet sent
        # rid -> (worker, http_worker_ipc) of requests sent where the router does not track them
        # (routed_dp_rank, router failure), so that a worker's death fails them too.
        self.untracked: dict[str, tuple[int, object]] = {}
        self.worker_sockets: list[WorkerSocket | None] = []
        # Process backend until attach() finds Ray's actors.
        self.liveness: WorkerLiveness = ProcessLiveness(
            router.num_workers, time.monotonic(), lambda: getattr(self.controller, "scheduler_procs", None) or [])
        self.metrics = None  # RouterMetrics with --enable-metrics
        self.unrouted = 0
        self.kv_seen: set[int] = set()
        self.dead_rank_answers = DeadRankAnswers(router.num_workers)

    @classmethod
    def create(cls, method: str, num_workers: int, server_args) -> RouterBinding:
        config = RouterSettings.load(method)
        router = make_router(method, num_workers, **config.options)
        context = zmq.Context.instance()
        feedback = router_sockets.open_feedback(context, config)
        settings.export_late_binding(router.holds_requests)
        try:
            kv = router_sockets.open_kv_events(context, config, server_args, num_workers)
        except BaseException:
            feedback.close(linger=0)
            raise
        return cls(router, context, feedback, kv)

    def attach(self, controller, port_args) -> None:
        from sglang.srt.runtime_context import get_observability
        from sglang.srt.utils.network import get_zmq_socket

        self.controller = controller
        controller.dispatching = self.dispatch
        self.worker_sockets = guard_worker_sockets(controller, self.worker_is_dead)
        self.to_tokenizer = get_zmq_socket(self.context, zmq.PUSH, port_args.tokenizer_ipc_name, False)
        if get_observability().enable_metrics and os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            from sglang_fair.binding.controller.router_metrics import RouterMetrics

            self.metrics = RouterMetrics()
        refs = getattr(controller, "event_loop_refs", None)  # only SGLang's RayDataParallelController has them
        if refs:
            n = self.router.num_workers
            self.liveness = RayLiveness(n, time.monotonic(), loops_per_rank(refs, n))
        worker_status.write_status(self.router.alive)

    def close(self) -> None:
        for sock in [self.feedback, *self.kv_sockets]:
            sock.close(linger=0)

    # ---- dispatch ---------------------------------------------------------------

    def dispatch(self, req) -> None:
        from sglang.srt.managers.io_struct import sock_send

        controller = self.controller
        reply_to = getattr(req, "http_worker_ipc", None)
        if self.route_direct(req, reply_to):
            return
        rid = req.rid
        client = client_of(getattr(req, "routing_key", None))
        # SGLang carries input_ids as an array("q"): the index packs it with one copy.
        tokens = getattr(req, "input_ids", None)
        if tokens is None:
            tokens = ()
        sampling = getattr(req, "sampling_params", None)
        max_new = getattr(sampling, "max_new_tokens", None) or 0
        try:
            worker = self.router.route(rid, client, tokens, int(max_new))
        except NoLiveWorkerError as exc:
            self.reply_error(rid, reply_to, str(exc))
            return
        except Exception:
            # Never lose a request to a router bug: place it on a live worker untracked.
            logger.exception("sglang-fair router: route() failed for %r; sending it round-robin", rid)
            worker = self._fallback_worker()
            if worker is None:
                self.reply_error(rid, reply_to, "no live data-parallel worker")
                return
            self.unrouted += 1
            self.untracked[rid] = (worker, reply_to)
        else:
            self.reply_route[rid] = reply_to
            if worker is None:  # late binding: the router places it when a worker has room
                self.held[rid] = req
        if worker is not None:
            sock_send(controller.workers[worker], req)
        self.send_released()

    def route_direct(self, req, reply_to) -> bool:
        """``routed_dp_rank`` (external routing) is honoured first, untracked. A dead worker's
        rank is answered 503 here: SGLang's own check would raise and end the controller."""
        from sglang.srt.managers.io_struct import sock_send

        rank = getattr(req, "routed_dp_rank", None)
        if rank is None:
            return False
        if not 0 <= rank < self.router.num_workers:
            self.reply_error(req.rid, reply_to, f"no data-parallel worker {rank}")
        elif not self.router.alive[rank]:
            self.reply_error(req.rid, reply_to, _died(rank))
        else:
            self.untracked[req.rid] = (rank, reply_to)
            sock_send(self.controller.workers[rank], req)
        return True

    def send_released(self) -> None:
        """Send the held requests the router placed since it was last asked (late binding)."""
        if not self.router.holds_requests:
            return
        from sglang.srt.managers.io_struct import sock_send, unwrap_from_pickle, wrap_as_pickle

        for rid, worker in self.router.take_released():
            req = self.held.pop(rid, None)
            if req is None:
                logger.warning("sglang-fair router: released request %r was not held here; ignored", rid)
                continue
            # SGLang's dispatch wrapper put the request's timing stats back
            # unpickled once our dispatch returned; the socket needs them wrapped.
            req.time_stats = wrap_as_pickle(unwrap_from_pickle(getattr(req, "time_stats", None)))
            sock_send(self.controller.workers[worker], req)

    def cancel_held(self, abort) -> None:
        """An ``AbortReq`` from the tokenizer: answer the requests it names that the router
        still holds (the workers never saw them). SGLang matches rids by prefix."""
        if not self.held or (not abort.abort_all and not abort.rid):
            return
        rids = [rid for rid in self.held if abort.abort_all or rid.startswith(abort.rid)]
        for rid in rids:
            if self.router.cancel(rid):
                del self.held[rid]
                self.reply_abort(rid, self.reply_route.pop(rid, None), abort.finished_reason, abort.abort_message)
        self.send_released()

    def _fallback_worker(self) -> int | None:
        live = [w for w in range(self.router.num_workers) if self.router.alive[w]]
        return random.choice(live) if live else None

    def reply_error(self, rid: str, http_worker_ipc, message: str) -> None:
        """Answer ``rid`` with HTTP 503 (finish reason ``abort``)."""
        self.reply_abort(rid, http_worker_ipc, {"type": "abort", "message": message, "status_code": 503}, message)

    def reply_abort(self, rid: str, http_worker_ipc, finished_reason: dict | None, message: str | None) -> None:
        """Finish ``rid`` at the tokenizer as aborted, as a worker does for a queued request
        (no ``finished_reason``: SGLang's own abort answer)."""
        from sglang.srt.managers.io_struct import AbortReq, sock_send

        abort = AbortReq(rid=rid, finished_reason=finished_reason, abort_message=message)
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
                self.receive(recv_req)
            self.drain_feedback()
            self.drain_kv_events()
            now = time.monotonic()
            if now >= next_check:
                next_check = now + LIVENESS_EVERY_S
                self.check_workers(now)
                if self.metrics is not None:
                    self.metrics.maybe_update(self.router, self.unrouted)

    def receive(self, recv_req) -> None:
        """One message from the tokenizer: SGLang's dispatcher, after answering aborts of held
        requests and applying a run-time change of the fair settings to the router too."""
        from sglang.srt.managers.io_struct import AbortReq, SetInternalStateReq

        if isinstance(recv_req, AbortReq):
            self.cancel_held(recv_req)
        elif isinstance(recv_req, SetInternalStateReq) and ADMIN_SETTINGS_KEY in recv_req.server_args:
            try:
                self.router.update_settings(SettingsUpdate.parse(recv_req.server_args[ADMIN_SETTINGS_KEY]))
            except OptionError as exc:  # the schedulers refuse it too, and say so
                logger.warning("sglang-fair router: fair settings change refused: %s", exc)
        self.controller._request_dispatcher(recv_req)
        self.send_to_tokenizer(self.dead_rank_answers.forwarded(recv_req, self.router.alive))

    def send_to_tokenizer(self, answers: list) -> None:
        from sglang.srt.managers.io_struct import sock_send

        for answer in answers:
            sock_send(self.to_tokenizer, answer)

    def drain_feedback(self) -> None:
        while True:
            try:
                raw = self.feedback.recv(flags=zmq.NOBLOCK)
            except zmq.Again:
                return
            self.handle_feedback(raw)

    def handle_feedback(self, raw: bytes) -> None:
        """One ``worker_reports`` message: a starting scheduler's ``Hello``, ``Done`` requests,
        a busy worker's ``Beat``; for late binding also ``Admitted`` and ``Progress``."""
        try:
            report = worker_reports.decoder.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError):
            logger.warning("sglang-fair router: malformed worker report ignored")
            return
        rank = report.rank
        if rank >= self.router.num_workers:
            logger.warning("sglang-fair router: report from unknown worker %s ignored", rank)
            return
        self.liveness.heard_from(rank, time.monotonic())
        if isinstance(report, worker_reports.Hello):
            self.liveness.hello(rank, report.pid)
            return
        try:
            self.tell_router(report, rank)
        except Exception:
            # A router bug must not end the controller, and with it every worker's requests: the
            # report is lost to the router (logged), the requests still reach their clients.
            logger.exception("sglang-fair router: a %s report from worker %d failed in the router; ignored",
                             type(report).__name__, rank)
        self.send_released()  # a finish or an admission may have made room for a held request

    def tell_router(self, report, rank: int) -> None:
        router = self.router
        if isinstance(report, worker_reports.Done):
            for rid, _client, out in report.finished:
                self.reply_route.pop(rid, None)
                self.untracked.pop(rid, None)
                router.on_finish(rid, rank, out)
        elif isinstance(report, worker_reports.Admitted):
            for rid, cached in report.admitted:
                router.on_admitted(rid, rank, cached)
        elif isinstance(report, worker_reports.Progress):
            for rid, out in report.progress:
                router.on_progress(rid, rank, out)

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

    def worker_is_dead(self, rank: int) -> bool:
        return not self.router.alive[rank] or rank in self.liveness.dead_ranks()

    def check_workers(self, now: float) -> None:
        router = self.router
        unreachable = [sock.rank for sock in self.worker_sockets if sock is not None and sock.unreachable]
        for rank in sorted({*self.liveness.dead_ranks(), *unreachable}):
            if router.alive[rank]:
                self.worker_died(rank)
        self.liveness.warn_quiet(router.alive, router.queue_sizes, now, settings.feedback_address())

    def worker_died(self, rank: int) -> None:
        lost = self.router.on_worker_down(rank)
        self.tracker.forget_worker(rank)
        controller = self.controller
        controller.status[rank] = False
        controller._refresh_active_workers()
        worker_status.write_status(self.router.alive)  # /health answers 503 from now on
        # With every worker dead, a late-binding router also hands back what it held.
        held = {rid for rid in lost if self.held.pop(rid, None) is not None}
        untracked = {rid: reply_to for rid, (worker, reply_to) in self.untracked.items() if worker == rank}
        for rid in untracked:
            del self.untracked[rid]
        logger.error("sglang-fair router: worker %d died; failing its %d requests in flight",
                     rank, len(lost) - len(held) + len(untracked))
        for rid in lost:
            message = "no live data-parallel worker" if rid in held else _died(rank)
            self.reply_error(rid, self.reply_route.pop(rid, None), message)
        for rid, reply_to in untracked.items():
            self.reply_error(rid, reply_to, _died(rank))
        if held:
            logger.error("sglang-fair router: no live worker left; failed %d held requests", len(held))
        # The tokenizer may be waiting on the dead worker's answer to a control message.
        self.send_to_tokenizer(self.dead_rank_answers.died(rank))
        self.send_released()  # the survivors may take requests meant for the dead worker


def _died(rank: int) -> str:
    """The error message of the requests a dead worker leaves unanswered."""
    return f"data-parallel worker {rank} died"
