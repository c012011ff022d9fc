"""The routing key: how a request's client and application fields travel from the HTTP edge to every scheduler.

SGLang carries ``Req.routing_key`` from the HTTP request to the scheduler
untouched, so the HTTP server (``http/identity.py``) writes the client id
there, followed by the application fields (``client;app=...;ia=...;st=...;sys=...``);
the schedulers and the data-parallel controller decode it here.
"""

from __future__ import annotations

from dataclasses import dataclass

from sglang_fair.core.clients import normalize_client_id

# header -> field of the encoded key; values are kept raw here and bounded by
# the scheduler (core.clients / core.apps normalization).
APP_HEADERS = {"x-app-id": "app", "x-interaction-id": "ia", "x-interaction-stage": "st", "x-system-tokens": "sys"}
INTEGER_FIELDS = {"st": "X-Interaction-Stage", "sys": "X-System-Tokens"}


@dataclass(frozen=True)
class RequestIdentity:
    client: str | None
    app: str | None = None
    interaction: str | None = None
    stage: int | None = None
    system_tokens: int = 0

    @property
    def charged_client(self) -> str:
        """The client id every component (scheduler, router, reports) charges: normalized,
        never split by the application fields."""
        return normalize_client_id(self.client)


def decode_identity(routing_key: str | None) -> RequestIdentity:
    """Inverse of ``encode_identity``; a key without fields is a bare client id."""
    if not routing_key or ";" not in routing_key:
        return RequestIdentity(routing_key)
    client, *fields = routing_key.split(";")
    values = dict(f.split("=", 1) for f in fields if "=" in f)
    stage = values.get("st")
    return RequestIdentity(
        client or None,
        app=values.get("app"),
        interaction=values.get("ia"),
        stage=parse_count(stage),
        system_tokens=parse_count(values.get("sys")) or 0,
    )


def routing_key_problem(routing_key: str) -> str | None:
    """What is malformed in the fields of ``client;key=value;...``, or None."""
    known = sorted(APP_HEADERS.values())
    for field in routing_key.split(";")[1:]:
        key, sep, value = field.partition("=")
        if not sep or key not in known or not value:
            return f"field {field[:40]!r} is not one of {', '.join(f'{k}=...' for k in known)}"
        if key in INTEGER_FIELDS and parse_count(value) is None:
            return f"{INTEGER_FIELDS[key]} must be an integer >= 0, got {value[:40]!r}"
    return None


def client_of(routing_key: str | None) -> str:
    """The client a request is charged to (``RequestIdentity.charged_client``)."""
    return decode_identity(routing_key).charged_client


def parse_count(value: str | None) -> int | None:
    """A count of at most 9 ASCII digits, else None. ``str.isdigit`` alone is not
    enough: it accepts digits such as '²' that ``int()`` then refuses."""
    if value is None or not (value.isascii() and value.isdigit() and len(value) <= 9):
        return None
    return int(value)
