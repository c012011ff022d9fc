"""The controller's own answers to the tokenizer, for requests no worker will answer.

A request the router could not place, one it held and was aborted, and the
requests a dead worker leaves behind are finished here as aborted (HTTP 503
for errors, finish reason ``abort``), on the tokenizer's socket; so are the
control-message answers a dead worker owes (``dead_rank_answers``).
"""

from __future__ import annotations

import zmq


def died(rank: int) -> str:
    """The error message of the requests a dead worker leaves unanswered."""
    return f"data-parallel worker {rank} died"


class TokenizerReplies:
    """The PUSH socket to the tokenizer, and the messages the controller sends on it."""

    def __init__(self, to_tokenizer: zmq.Socket) -> None:
        self.to_tokenizer = to_tokenizer

    def error(self, rid: str, http_worker_ipc: object, message: str) -> None:
        """Answer ``rid`` with HTTP 503 (finish reason ``abort``)."""
        self.abort(rid, http_worker_ipc, {"type": "abort", "message": message, "status_code": 503}, message)

    def abort(self, rid: str, http_worker_ipc: object, finished_reason: dict | None, message: str | None) -> None:
        """Finish ``rid`` at the tokenizer as aborted, as a worker does for a queued request
        (no ``finished_reason``: SGLang's own abort answer)."""
        from sglang.srt.managers.io_struct import AbortReq, sock_send

        abort = AbortReq(rid=rid, finished_reason=finished_reason, abort_message=message)
        if http_worker_ipc is not None:  # several HTTP workers: the one that asked
            abort.http_worker_ipc = http_worker_ipc
        sock_send(self.to_tokenizer, abort)

    def send(self, answers: list) -> None:
        """Answers built elsewhere (a dead worker's control-message answers)."""
        from sglang.srt.managers.io_struct import sock_send

        for answer in answers:
            sock_send(self.to_tokenizer, answer)
