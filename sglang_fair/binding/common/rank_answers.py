"""Answers to a control message on behalf of a data-parallel rank that cannot give its own.

SGLang's tokenizer sends control messages (``/get_server_info``'s
``GetInternalStateReq``, ``/fair/settings``' ``SetInternalStateReq``,
``/flush_cache``, weight updates, ...) to every rank through one
``FanOutCommunicator`` per kind, and waits for one answer per rank; a kind has
one call in flight at a time, so a missing answer blocks every later call of
that kind. The controller answers for a dead rank (``controller/dead_rank_answers.py``)
and the tokenizer for a rank silent past a deadline (``http/state_deadline.py``)
with what this module builds: an answer of the kind the tokenizer waits for,
which says that nothing was done (``success``/``updated`` false) and why.
"""

from __future__ import annotations

import typing
from typing import Any

import msgspec

NO_ANSWER = "no_answer"  # key of an internal_state the rank did not give itself


def output_type(request: object) -> type | None:
    """The answer class the tokenizer waits for when it sends ``request`` to every rank (None:
    not such a control message). SGLang names each ``FooReq``/``FooReqInput``'s answer
    ``FooReqOutput``; only the kinds of the tokenizer's fan-out communicators count."""
    from sglang.srt.managers import io_struct

    name = type(request).__name__
    for candidate in (name + "Output", name.removesuffix("Input") + "Output"):
        cls = getattr(io_struct, candidate, None)
        if isinstance(cls, type) and cls in communicator_outputs():
            return cls
    return None


def communicator_outputs() -> frozenset[type]:
    """The answer classes of the tokenizer's fan-out communicators."""
    global _OUTPUTS
    if _OUTPUTS is None:
        try:  # SGLang 0.5.23: one table (private; named in docs/architecture.md's inventory)
            from sglang.srt.managers.tokenizer_control_mixin import _COMMUNICATOR_SPECS

            _OUTPUTS = frozenset(spec[1] for spec in _COMMUNICATOR_SPECS)
        except ImportError:  # older releases: the kinds our endpoints and SGLang's info routes use
            from sglang.srt.managers.io_struct import (
                FlushCacheReqOutput,
                GetInternalStateReqOutput,
                SetInternalStateReqOutput,
            )

            _OUTPUTS = frozenset({GetInternalStateReqOutput, SetInternalStateReqOutput, FlushCacheReqOutput})
    return _OUTPUTS


_OUTPUTS: frozenset[type] | None = None


def failed_answer(cls: type, message: str, state: dict[str, Any]) -> Any | None:
    """An instance of the msgspec answer class ``cls`` that reports failure: bool fields false,
    ``message``-like string fields ``message``, dict fields ``state``, lists empty, optional
    fields None. None when a required field has a type this cannot fill."""
    values: dict[str, Any] = {}
    for field in msgspec.structs.fields(cls):
        required = field.required
        kind = typing.get_origin(field.type) or field.type
        says_why = "message" in field.name or field.name == "error"
        if field.type is bool:
            values[field.name] = False
        elif field.type is str and (required or says_why):
            values[field.name] = message
        elif says_why and field.type == (str | None):
            values[field.name] = message
        elif kind is dict or field.type is dict:
            if required:
                values[field.name] = dict(state)
        elif kind is list and required:
            values[field.name] = []
        elif required:
            args = typing.get_args(field.type)
            if type(None) in args:
                values[field.name] = None
            else:
                return None
    try:
        return cls(**values)
    except (TypeError, msgspec.ValidationError):
        return None
