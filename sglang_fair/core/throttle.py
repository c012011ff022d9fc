"""Request limits for FairServe's Overload and Interaction-driven Throttling (§4.2).

Arrival times are kept per user and per (user, application) in a sliding
window. Every arrival is counted, accepted or not (Algorithm 1, line 19,
counts before it checks), so a client that keeps hammering while throttled
stays over its limit. Whether to apply the limits at all (KV overload, not
inside an interaction) is the policy's decision; this class only counts.

Limits: a per-user limit over all applications (``user_limit``, with
per-user overrides) and a per-application limit applied to each user of that
application (``app_limits[app]``, else ``app_limit``). None means no limit.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from sglang_fair.core import checks


@dataclass(frozen=True)
class ThrottleDecision:
    """Refuse an arriving request: the backend answers HTTP 429 with Retry-After."""

    reason: str  # e.g. "user-limit", "app-limit"
    retry_after_s: float  # seconds until the request would be under the limit
    message: str  # human-readable, names the limit that was hit


# A Retry-After below this is rounded up: clients should not retry at once.
MIN_RETRY_AFTER_S = 1.0


def check_request_limit(where: str, limit: object) -> None:
    """A limit is a number of requests per window: ``OptionError`` (a ValueError) naming ``where`` otherwise."""
    checks.int_at_least(f"{where} (requests per window)", limit, 1)


@dataclass
class RequestLimiter:
    window_s: float = 60.0
    user_limit: int | None = None
    user_limits: dict[str, int] = field(default_factory=dict)
    app_limit: int | None = None
    app_limits: dict[str, int] = field(default_factory=dict)
    _user: dict[str, deque[float]] = field(default_factory=dict, repr=False)
    _user_app: dict[str, dict[str, deque[float]]] = field(default_factory=dict, repr=False)
    _last_sweep: float = field(default=float("-inf"), repr=False)

    def __post_init__(self) -> None:
        if not self.window_s > 0:
            raise ValueError(f"throttle window must be > 0 seconds, got {self.window_s!r}")
        for where, limit in [("user_limit", self.user_limit), ("app_limit", self.app_limit)] + [
            (f"user_limits.{k}", v) for k, v in self.user_limits.items()
        ] + [(f"app limit of {k}", v) for k, v in self.app_limits.items()]:
            if limit is not None:
                check_request_limit(where, limit)

    def record(self, client: str, app: str | None, now: float) -> None:
        """Count one arrival of ``client`` (for ``app``, if known) at ``now``."""
        self._sweep(now)
        self._push(self._user.setdefault(client, deque()), now)
        if app is not None:
            self._push(self._user_app.setdefault(client, {}).setdefault(app, deque()), now)

    def exceeded(self, client: str, app: str | None, now: float) -> ThrottleDecision | None:
        """The first limit ``client`` is over (user first, then app), or None."""
        limit = self.user_limits.get(client, self.user_limit)
        times = self._user.get(client)
        if limit is not None and times is not None and self._count(times, now) > limit:
            return ThrottleDecision(
                "user-limit",
                self._retry_after(times, limit, now),
                f"client {client!r} sent more than {limit} requests in {self.window_s:g}s while the server is overloaded",
            )
        if app is None:
            return None
        limit = self.app_limits.get(app, self.app_limit)
        times = self._user_app.get(client, {}).get(app)
        if limit is not None and times is not None and self._count(times, now) > limit:
            return ThrottleDecision(
                "app-limit",
                self._retry_after(times, limit, now),
                f"client {client!r} sent more than {limit} requests to application {app!r} in "
                f"{self.window_s:g}s while the server is overloaded",
            )
        return None

    def forget(self, client: str) -> None:
        self._user.pop(client, None)
        self._user_app.pop(client, None)

    def _sweep(self, now: float) -> None:
        # Drop clients with no arrival in the window, at most once per window
        # (O(1) amortized): clients that were only ever throttled never reach
        # the scheduler's idle collection, so this is what bounds their state.
        if now - self._last_sweep < self.window_s:
            return
        self._last_sweep = now
        horizon = now - self.window_s
        for client in [c for c, t in self._user.items() if not t or t[-1] <= horizon]:
            self.forget(client)
        for apps in self._user_app.values():
            for app in [a for a, t in apps.items() if not t or t[-1] <= horizon]:
                del apps[app]

    def _push(self, times: deque[float], now: float) -> None:
        times.append(now)
        self._expire(times, now)

    def _expire(self, times: deque[float], now: float) -> None:
        horizon = now - self.window_s
        while times and times[0] <= horizon:
            times.popleft()

    def _count(self, times: deque[float], now: float) -> int:
        self._expire(times, now)
        return len(times)

    def _retry_after(self, times: deque[float], limit: int, now: float) -> float:
        # A new request is under the limit once at most limit-1 recorded ones
        # remain in the window, i.e. after times[len - limit] expires.
        # window - age, not (oldest + window) - now: the latter rounds above the window
        # for some clock values when the oldest arrival is the current one (age 0).
        age = now - times[len(times) - limit]
        return max(MIN_RETRY_AFTER_S, self.window_s - age)
