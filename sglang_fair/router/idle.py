"""Bounded per-client router state: which clients are idle, and since when.

A client is idle when it has nothing in flight on any worker. Routers that
keep per-client state (D2LPM's deficit counters, per-client round-robin's
cursor) drop it once the client has been idle for ``timeout_s``, like the
core's ``FairScheduler.collect_idle``; a returning client starts afresh, as a
new one would. Idle clients are kept in the order they became idle, so a
sweep only looks at the ones due: O(1) per request, amortized.
"""

from __future__ import annotations

from collections import OrderedDict

from sglang_fair.core import checks

DEFAULT_IDLE_TIMEOUT_S = 600.0


def check_idle_timeout(value: float) -> float:
    return checks.positive_number("router idle_timeout_s (seconds)", value)


class IdleClients:
    def __init__(self, timeout_s: float = DEFAULT_IDLE_TIMEOUT_S) -> None:
        self.timeout_s = check_idle_timeout(timeout_s)
        self.inflight: dict[str, int] = {}  # clients with requests in flight -> how many
        self.idle_since: OrderedDict[str, float] = OrderedDict()  # oldest first

    def __len__(self) -> int:
        """Clients known (busy or idle, not yet forgotten)."""
        return len(self.inflight) + len(self.idle_since)

    def dispatched(self, client: str) -> None:
        self.idle_since.pop(client, None)
        self.inflight[client] = self.inflight.get(client, 0) + 1

    def finished(self, client: str, now: float) -> None:
        left = self.inflight.get(client, 0) - 1
        if left > 0:
            self.inflight[client] = left
            return
        self.inflight.pop(client, None)
        self.idle_since[client] = now  # a new key goes last: the order stays by idle time

    def sweep(self, now: float) -> list[str]:
        """Forget and return the clients idle for longer than the timeout."""
        horizon = now - self.timeout_s
        gone = []
        while self.idle_since:
            client, since = next(iter(self.idle_since.items()))
            if since >= horizon:
                break
            self.idle_since.popitem(last=False)
            gone.append(client)
        return gone
