"""HTTP calls and ``/metrics`` reads for tests that talk to a real server.

``call`` returns the status and body of any reply, an HTTP error's included,
so a test asserts on the status instead of catching ``HTTPError``.
``metric`` sums one Prometheus series (over its dp ranks); ``wait_until``
polls a reading until it satisfies a predicate or a deadline passes, for the
gauges the server refreshes once a second: poll, never sleep a fixed time.
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes
    headers: dict[str, str]  # names lower-cased
    elapsed_s: float

    def json(self, empty: Any = None) -> Any:
        """The body decoded as JSON; ``empty`` for an empty body."""
        return json.loads(self.body) if self.body else empty

    def json_or_raw(self) -> Any:
        """The body as JSON, ``{}`` if empty, ``{"raw": text}`` if it is not JSON."""
        try:
            return json.loads(self.body or b"{}")
        except ValueError:
            return {"raw": self.body.decode(errors="replace")}

    @property
    def text(self) -> str:
        return self.body.decode(errors="replace")


def call(url: str, body: bytes | Mapping[str, Any] | None = None, headers: Mapping[str, str] | None = None,
         timeout: float = 120.0) -> Reply:
    """GET ``url`` (POST when ``body`` is given: bytes as they are, a mapping as JSON); any status is returned."""
    if body is not None and not isinstance(body, bytes):
        body = json.dumps(body).encode()
    all_headers = dict(headers or {})
    if body is not None:
        all_headers = {"Content-Type": "application/json", **all_headers}
    request = urllib.request.Request(url, data=body, headers=all_headers)
    started = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            status, raw, got = reply.status, reply.read(), reply.headers
    except urllib.error.HTTPError as err:
        status, raw, got = err.code, err.read(), err.headers
    return Reply(status, raw, {k.lower(): v for k, v in got.items()}, time.monotonic() - started)


def metrics_text(server: Any, timeout: float = 60.0) -> str:
    """The server's ``/metrics`` page (``server``: anything with ``url(path)``, or a base URL)."""
    url = server.url("/metrics") if hasattr(server, "url") else server.rstrip("/") + "/metrics"
    reply = call(url, timeout=timeout)
    assert reply.status == 200, f"/metrics answered {reply.status}: {reply.text[:500]}"
    return reply.text


def _label_pattern(labels: Mapping[str, str]) -> str:
    if not labels:
        return r"(?:\{[^}]*\})?"
    parts = "".join(rf'(?=[^}}]*\b{re.escape(k)}="{re.escape(v)}")' for k, v in labels.items())
    return rf"\{{{parts}[^}}]*\}}"


def samples(text: str, name: str, **labels: str) -> list[float]:
    """The values of every sample of metric ``name`` whose labels include ``labels``."""
    pattern = rf"^{re.escape(name)}{_label_pattern(labels)} (\S+)$"
    return [float(v) for v in re.findall(pattern, text, re.M)]


def metric(text: str, name: str, **labels: str) -> float | None:
    """The sum of ``name``'s matching samples (e.g. over dp ranks), None if there is none."""
    found = samples(text, name, **labels)
    return sum(found) if found else None


def client_metric(text: str, name: str, client: str) -> float | None:
    """``sglang_fair_<name>`` for one client, summed over dp ranks; None if absent."""
    return metric(text, f"sglang_fair_{name}", client=client)


def wait_until(read: Callable[[], T], ok: Callable[[T], bool], timeout_s: float = 30.0, interval_s: float = 0.25,
               what: str = "condition") -> T:
    """Call ``read`` until ``ok(value)`` holds and return that value; at the deadline, AssertionError
    with the last reading."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = read()
        if ok(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached after {timeout_s:.0f} s; last reading: {value!r}")
        time.sleep(interval_s)
