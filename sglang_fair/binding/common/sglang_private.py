"""SGLang's internals that the binding touches: every name, the SGLang class it belongs to, and why.

SGLang promises nothing about these, so each one is reached only through an
accessor here: an upgrade that renames or removes one breaks here, and
``grep sglang_private`` finds every use. ``INVENTORY`` lists SGLang's private
names (a leading underscore); ``WRITTEN`` the public names of SGLang's
internal state that we write (reading it needs no entry). ``NOT_SGLANG``
lists the standard library's private names we use, which need no accessor.
``tests/binding/common/test_sglang_private.py`` fails on a private access
anywhere else in the binding, and on one missing from the tables.

Not listed here: the functions we hook (``binding/hooks.py`` is their
table); our own attribute on SGLang objects (``attached_state.py``); fields
the supported releases name differently (``sglang_fields.py``); public
fields of requests and options that we fill in (``routing_key``,
``http_worker_ipc``, ``kv_events_config``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple


class Touched(NamedTuple):
    name: str
    owner: str  # the SGLang class (or module) it belongs to
    why: str


INVENTORY = (
    Touched("_request_dispatcher", "DataParallelController",
            "our event loop hands it every tokenizer message: requests reach our dispatching through it, "
            "control messages the live workers"),
    Touched("_refresh_active_workers", "DataParallelController",
            "recomputes the active workers from status, after we mark one dead"),
    Touched("_release_aborted_request", "Scheduler",
            "frees a request our accounting failed on and took back out of the queue"),
    Touched("_add_request_to_queue", "Scheduler",
            "requeues a request preempted for a starved client, as SGLang's own retraction does"),
    Touched("_get_running_request_total_token_offset", "PrefillAdder",
            "the decode budget a preempted request held, given back as PrefillAdder.preempt_to_schedule does"),
    Touched("_global_state", "sglang.srt.entrypoints.http_server",
            "the tokenizer manager the /fair/settings routes call"),
    Touched("_queueing_lock", "FanOutCommunicator",
            "no call of the kind starts while late answers of an ended call are drained"),
    Touched("_result_event", "FanOutCommunicator", "the call in flight: set when every rank answered"),
    Touched("_result_values", "FanOutCommunicator", "the call in flight: the answers so far"),
    Touched("_result_fan_out", "FanOutCommunicator", "the call in flight: how many answers it waits for"),
    Touched("_is_cpu_amx_available", "sglang.srt.distributed.bootstrap",
            "SGLang binds rank threads itself on AMX: we pin only where it does not"),
    Touched("_is_cpu_arm64", "sglang.srt.distributed.bootstrap", "likewise on arm64"),
    Touched("_resolved_overrides", "ServerArgs",
            "a copy of server_args gets its own list, so declarations on the copy do not reach the original"),
)

WRITTEN = (
    Touched("dispatching", "DataParallelController", "SGLang's dispatch of requests, replaced by the router's"),
    Touched("status", "DataParallelController", "a dead worker is marked inactive: control messages skip it"),
    Touched("workers", "DataParallelController",
            "each worker's socket wrapped so that a dead worker cannot block the controller"),
    Touched("time_stats", "TokenizedGenerateReqInput",
            "a held request's timing stats wrapped for the socket again (SGLang unwrapped them after dispatch)"),
    Touched("run_data_parallel_controller_process", "sglang.srt.entrypoints.engine",
            "SGLang 0.5.21: the controller process is spawned from our entry point, which loads the plugins"),
    Touched("total_offset", "PrefillAdder.memory_budget", "the decode budget a preempted request held"),
    Touched("batch_is_full", "ScheduleBatch", "a full batch that we preempted from has room again"),
    Touched("<name>_communicator", "TokenizerManager", "the info and admin calls bounded by a deadline"),
)

NOT_SGLANG = (
    Touched("_actions", "argparse.ArgumentParser", "SGLang's parser: our names join its options' choices"),
    Touched("_exit", "os", "leave a finished scheduler before finalization (quiet_exit)"),
    Touched("_run_exitfuncs", "atexit", "run the exit handlers first (quiet_exit)"),
    Touched("_Environ", "os", "the type of os.environ, in a signature"),
)


# ---- DataParallelController -----------------------------------------------------------------


def replace_dispatch(controller: Any, dispatch: Callable[[Any], None]) -> None:
    controller.dispatching = dispatch


def dispatch_as_sglang(controller: Any, message: Any) -> None:
    """SGLang's own handling of a tokenizer message (its type dispatcher)."""
    controller._request_dispatcher(message)


def mark_worker_dead(controller: Any, rank: int) -> None:
    controller.status[rank] = False
    controller._refresh_active_workers()


def replace_worker_sockets(controller: Any, sockets: list) -> list:
    """Put ``sockets`` in the slots of ``controller.workers`` (in place: SGLang holds the list)."""
    controller.workers[:] = sockets
    return controller.workers


@contextlib.contextmanager
def controller_process_entry(entry: Callable[..., None]) -> Iterator[None]:
    """SGLang 0.5.21's launch spawns ``engine.run_data_parallel_controller_process`` (pickled by
    name): within this block, that name is ``entry``."""
    from sglang.srt.entrypoints import engine

    stock = engine.run_data_parallel_controller_process
    engine.run_data_parallel_controller_process = entry
    try:
        yield
    finally:
        engine.run_data_parallel_controller_process = stock


def rewrap_time_stats(req: Any) -> None:
    """SGLang's dispatch wrapper put the request's timing stats back unpickled once our dispatch
    returned; the socket needs them wrapped."""
    from sglang.srt.managers.io_struct import unwrap_from_pickle, wrap_as_pickle

    req.time_stats = wrap_as_pickle(unwrap_from_pickle(getattr(req, "time_stats", None)))


# ---- Scheduler, PrefillAdder, ScheduleBatch ---------------------------------------------------


def release_aborted_request(scheduler: Any, req: Any) -> None:
    scheduler._release_aborted_request(req)


def add_request_to_queue(scheduler: Any, req: Any) -> None:
    scheduler._add_request_to_queue(req)


def give_back_decode_budget(adder: Any, req: Any) -> None:
    """As ``PrefillAdder.preempt_to_schedule``: drop the decode budget ``req`` reserved."""
    adder.memory_budget.total_offset -= adder._get_running_request_total_token_offset(req)


def mark_batch_not_full(batch: Any) -> None:
    batch.batch_is_full = False


# ---- the tokenizer process ----------------------------------------------------------------------


def global_tokenizer_manager() -> Any:
    from sglang.srt.entrypoints import http_server

    return http_server._global_state.tokenizer_manager


def communicator(manager: Any, name: str) -> Any:
    """The ``FanOutCommunicator`` of ``name`` calls, or None."""
    return getattr(manager, f"{name}_communicator", None)


def replace_communicator(manager: Any, name: str, replacement: Any) -> None:
    setattr(manager, f"{name}_communicator", replacement)


def queueing_lock(comm: Any) -> Any:
    """The communicator's lock: one call of its kind at a time."""
    return comm._queueing_lock


def call_in_flight(comm: Any) -> tuple[Any, list | None, int | None]:
    """(event, answers so far, answers awaited) of the call in flight; Nones without one."""
    return comm._result_event, comm._result_values, comm._result_fan_out


def set_call_in_flight(comm: Any, event: Any, values: list | None, fan_out: int | None) -> None:
    comm._result_event, comm._result_values, comm._result_fan_out = event, values, fan_out


# ---- start-up ------------------------------------------------------------------------------------


def sglang_binds_cpu_threads() -> bool:
    """Whether SGLang binds each rank's threads itself (AMX, arm64)."""
    from sglang.srt.distributed import bootstrap

    return bool(bootstrap._is_cpu_amx_available or bootstrap._is_cpu_arm64)


def unshare_resolved_overrides(server_args_copy: Any) -> None:
    """A shallow copy of ``ServerArgs`` gets its own list of resolved overrides."""
    stash = getattr(server_args_copy, "_resolved_overrides", None)
    if stash is not None:
        server_args_copy._resolved_overrides = list(stash)
