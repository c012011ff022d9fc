"""A request's one final answer from a scheduler hook: an abort, sent as SGLang sends its own.

Used where our code ends a request itself: FairServe's throttle refusing an
arrival (``arrival_throttle``), and a request our code failed on
(``charging.note_queued``, ``arrival_throttle``), answered with HTTP 500 so
that the scheduler, and every other request, goes on.
"""

from __future__ import annotations

import contextlib
import logging
from http import HTTPStatus

from sglang_fair.binding.common.version import sends_aborts_inline
from sglang_fair.binding.scheduler.schedule_policy import FairSchedulePolicy

logger = logging.getLogger(__name__)


def fail_request(scheduler, fair: FairSchedulePolicy, req, exc: Exception) -> None:
    """Our code failed on ``req``: answer it with one error (HTTP 500) and forget it, so
    the scheduler, and every other request, goes on. Called from an ``except`` block."""
    logger.exception("sglang-fair: scheduling request %r failed; answering it with an error", req.rid)
    with contextlib.suppress(Exception):
        fair.forget(req)
    refuse(scheduler, req, HTTPStatus.INTERNAL_SERVER_ERROR,
           f"sglang-fair could not schedule this request ({type(exc).__name__}: {exc})")


def refuse(scheduler, req, status: HTTPStatus, message: str, **fields) -> None:
    """Send ``req``'s one final answer: an abort with ``status`` (SGLang's own refusal path)."""
    from sglang.srt.managers.scheduler import _make_abort_req

    reason = {"type": "abort", "status_code": status, "message": message, **fields}
    abort_req = _make_abort_req(req, finished_reason=reason)
    if sends_aborts_inline():  # as SGLang itself does there (the hook table reports these the same way)
        scheduler.ipc_channels.send_to_tokenizer.send_output(abort_req, req)
    else:
        scheduler.send_abort_output(abort_req, req)
