"""Client identity: the rule that turns whatever a request carries into a client id.

Ids are bounded so that a hostile client cannot grow per-client state or metric
label sets with huge or odd strings. The rule:

* missing or empty -> ``default``;
* 1..64 characters from ``[A-Za-z0-9._@-]`` -> kept as is;
* anything else -> ``~`` followed by 16 hex digits of its SHA-256. ``~`` is not
  in the allowed set, so a mapped id never collides with a literal one, and the
  same raw value always maps to the same client.
"""

from __future__ import annotations

import hashlib
import re

DEFAULT_CLIENT = "default"
MAX_CLIENT_ID_LEN = 64
_VALID = re.compile(r"[A-Za-z0-9._@-]{1,%d}" % MAX_CLIENT_ID_LEN)
_MAPPED = re.compile(r"~[0-9a-f]{16}")


def normalize_client_id(raw: object) -> str:
    """Return the client id to charge for a raw identity value (see module doc)."""
    if raw is None:
        return DEFAULT_CLIENT
    text = raw if isinstance(raw, str) else str(raw)
    text = text.strip()
    if not text:
        return DEFAULT_CLIENT
    if _VALID.fullmatch(text):
        return text
    return "~" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def is_client_id(value: object) -> bool:
    """Whether ``value`` is an id as charged: kept as is by ``normalize_client_id``, or a mapped ``~`` id."""
    return isinstance(value, str) and bool(_VALID.fullmatch(value) or _MAPPED.fullmatch(value))
