"""Leave a process without the interpreter's finalization, after its own clean-up.

SGLang imports Triton even on CPU, and Triton's nanobind extension prints
some 50 lines of "leaked" warnings when an interpreter that loaded it
finalizes: at every shutdown, once per scheduler process. Running the exit
handlers and then ``os._exit`` keeps every clean-up (``atexit``, logging,
multiprocessing's) and drops only that report.

Hook: ``exit_after_graceful_shutdown`` AFTER
``sglang.srt.managers.scheduler.abort_distributed_environment``, the last
call of a scheduler's graceful shutdown in ``run_scheduler_process``
(SGLang 0.5.23). ``python -m sglang_fair.launch_server`` ends its own process
the same way once the server has stopped; the detokenizer and the
controller are killed by SGLang and print nothing.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys


def exit_without_finalizing(code: int = 0) -> None:
    atexit._run_exitfuncs()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)


def exit_after_graceful_shutdown(result, *args, **kwargs) -> None:
    """The scheduler released everything and is about to return from its process function."""
    exit_without_finalizing(0)
