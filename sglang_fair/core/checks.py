"""The checks options classes run on their values: one wording for each kind of bad value.

Each returns the value in its canonical type (``int``, ``float``, a plain
``dict``) or raises ``OptionError`` (a ``ValueError``) naming the option and
what it got. Booleans are not numbers here: ``True`` for a token count is a
mistake, not a 1. Every options class of the core, the routers and the
workloads checks its values with these.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping

from sglang_fair.core.errors import OptionError


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def positive_int(name: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise OptionError(f"{name} must be a positive integer, got {value!r}")
    return value


def int_at_least(name: str, value: object, low: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise OptionError(f"{name} must be an integer >= {low}, got {value!r}")
    return value


def integer(name: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise OptionError(f"{name} must be an integer, got {value!r}")
    return value


def boolean(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise OptionError(f"{name} must be true or false, got {value!r}")
    return value


def optional_positive_int(name: str, value: object) -> int | None:
    return None if value is None else positive_int(name, value)


def positive_number(name: str, value: object) -> float:
    if not _is_number(value) or not math.isfinite(value) or value <= 0:  # type: ignore[arg-type]
        raise OptionError(f"{name} must be a positive finite number, got {value!r}")
    return float(value)  # type: ignore[arg-type]


def non_negative_number(name: str, value: object) -> float:
    if not _is_number(value) or not math.isfinite(value) or value < 0:  # type: ignore[arg-type]
        raise OptionError(f"{name} must be a non-negative finite number, got {value!r}")
    return float(value)  # type: ignore[arg-type]


def fraction(name: str, value: object) -> float:
    """A number in (0, 1]."""
    if not _is_number(value) or not 0 < value <= 1:  # type: ignore[operator]
        raise OptionError(f"{name} must be a number in (0, 1], got {value!r}")
    return float(value)  # type: ignore[arg-type]


def at_least(name: str, value: object, minimum: float, *, integer: bool = False, strict: bool = False) -> float:
    """A finite number >= ``minimum`` (> with ``strict``); an integer with ``integer``."""
    ok = isinstance(value, int) and not isinstance(value, bool) if integer else _is_number(value)
    if not ok or not math.isfinite(value) or value < minimum or (strict and value == minimum):  # type: ignore[operator]
        kind = "an integer" if integer else "a finite number"
        raise OptionError(f"{name} must be {kind} {'>' if strict else '>='} {minimum:g}, got {value!r}")
    return value if integer else float(value)  # type: ignore[return-value,arg-type]


def share(name: str, value: object) -> float:
    """A number in [0, 1]."""
    if not _is_number(value) or not 0 <= value <= 1:  # type: ignore[operator]
        raise OptionError(f"{name} must be a fraction in [0, 1], got {value!r}")
    return float(value)  # type: ignore[arg-type]


def one_of(name: str, value: object, choices: Collection[str]) -> str:
    if value not in choices:
        raise OptionError(f"{name} must be one of {', '.join(sorted(choices))}; got {value!r}")
    return value  # type: ignore[return-value]


def client_weights(name: str, value: object) -> dict[str, float]:
    """A map of client id to a positive weight (an empty map: every client weighs 1)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise OptionError(f"{name} must be a map of client id to a positive weight, got {value!r}")
    out = {}
    for client, weight in value.items():
        if not isinstance(client, str) or not client:
            raise OptionError(f"{name}: client ids must be non-empty strings, got {client!r}")
        out[client] = positive_number(f"{name}[{client!r}]", weight)
    return out
