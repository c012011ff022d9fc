"""The side channel's messages, from each worker's scheduler to the data-parallel router.

Typed msgspec structs (as SGLang's own IPC), one per kind, encoded as msgpack
arrays ``[kind, rank, payload]``. Decoding checks every field: a malformed
report is refused whole (``msgspec.ValidationError``), never half-applied.
"""

from __future__ import annotations

from typing import Annotated, Union

import msgspec

Count = Annotated[int, msgspec.Meta(ge=0)]


class Hello(msgspec.Struct, tag="hello", array_like=True, frozen=True):
    """A scheduler started: the controller watches its process."""

    rank: Count
    pid: Count


class Done(msgspec.Struct, tag="done", array_like=True, frozen=True):
    """Requests that finished, were refused or aborted: (rid, client, output tokens)."""

    rank: Count
    finished: list[tuple[str, str, Count]]


class Admitted(msgspec.Struct, tag="admitted", array_like=True, frozen=True):
    """Requests entering a running batch for the first time: (rid, cached prompt tokens)."""

    rank: Count
    admitted: list[tuple[str, Count]]


class Progress(msgspec.Struct, tag="progress", array_like=True, frozen=True):
    """Running requests' output so far: (rid, output tokens)."""

    rank: Count
    progress: list[tuple[str, Count]]


class Beat(msgspec.Struct, tag="beat", array_like=True, frozen=True):
    """A worker busy with long requests is alive."""

    rank: Count


Report = Union[Hello, Done, Admitted, Progress, Beat]

encoder = msgspec.msgpack.Encoder()
decoder = msgspec.msgpack.Decoder(Report)
