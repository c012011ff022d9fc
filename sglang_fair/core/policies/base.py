"""The interface every scheduling policy implements, whatever the backend.

A backend (SGLang's scheduler, the simulator) drives a policy through
``FairScheduler``: it asks for an ``order`` of the waiting queue, then walks
the candidates the policy yields from ``walk`` and admits each one that fits,
stopping when its batch is full. Policies see token counts and client ids
only; each charge arrives as one ``costs.Charge`` (``charge_request``), and
``charge`` receives its weighted amount.
"""

from __future__ import annotations

import time
from abc import ABC
from collections.abc import Callable, Iterator, Mapping
from typing import ClassVar

from sglang_fair.core.costs import Charge
from sglang_fair.core.errors import OptionError
from sglang_fair.core.options import FairOptions
from sglang_fair.core.requests import ClientActivity, RequestState, TrackedRequest
from sglang_fair.core.throttle import ThrottleDecision



class Policy(ABC):
    name: ClassVar[str]
    # True when ``order`` uses ``cached_len``, i.e. the engine must match
    # prefixes before ordering (LPM-like policies).
    cache_aware: ClassVar[bool] = False
    # True when ``order`` is the engine's own sort (LPM if cache-aware, else FCFS), which an
    # engine binding may keep; False for an order of the policy's own (Justitia's finish times),
    # which every backend must apply.
    engine_order: ClassVar[bool] = True
    default_cost: ClassVar[str] = "linear"

    def __init__(
        self,
        options: FairOptions,
        activity: Mapping[str, ClientActivity],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.options = options
        # Live per-client queued/running counts, owned by FairScheduler.
        self.activity = activity
        self.clock = clock

    def order(self, queue: list[TrackedRequest]) -> list[TrackedRequest]:
        """The queue in the order candidates should be considered (FCFS here)."""
        return sorted(queue, key=_arrival)

    def walk(self, ordered: list[TrackedRequest]) -> Iterator[TrackedRequest]:
        """Yield admission candidates; the caller admits (or not) before resuming.

        The caller stops iterating when its batch is full. A yielded request
        still QUEUED on resumption was not admitted for an engine reason.
        """
        for req in ordered:
            if req.state is RequestState.QUEUED:
                yield req

    def on_enqueue(self, client: str, first_in_queue: bool) -> None:
        """A request of ``client`` entered the waiting queue."""

    def on_queue_left(self, client: str) -> None:
        """The last queued request of ``client`` left the waiting queue."""

    def charge(self, client: str, amount: float) -> None:
        """``client`` received ``amount`` of (weight-normalized) service."""

    def charge_request(self, req: TrackedRequest, charge: Charge) -> None:
        """``req`` received ``charge``. Policies that price service per request
        (FairServe) or track delivered work (Justitia) override this; the rest
        see ``charge`` with the weighted amount."""
        self.charge(req.client, charge.weighted)

    def on_request(self, req: TrackedRequest) -> None:
        """A new request arrived (not a requeue); called before it is queued."""

    def on_finish(self, req: TrackedRequest) -> None:
        """``req`` finished or was aborted (called once, before it is dropped)."""

    def should_throttle(
        self, client: str, app: str | None, interaction: str | None, kv_usage: float
    ) -> ThrottleDecision | None:
        """Called once per arriving request, before ``enqueue``.

        ``kv_usage`` is the fraction (0..1) of the KV cache in use. A decision
        means: do not enqueue, answer 429 + Retry-After. Default: never.
        """
        return None

    def counter(self, client: str) -> float | None:
        """The policy's per-client state for metrics (VTC counter, DLPM deficit)."""
        return None

    def check_refill(self) -> bool:
        """A deficit policy's CHECKREFILL (DLPM): refill the counters if no queued client may go;
        whether it did. Policies without deficits never refill."""
        return False

    def settings_changed(self) -> None:
        """``options`` changed at run time (quantum, client weights): re-read what was cached."""

    def throttle_settings(self) -> dict | None:
        """The throttle limits in force, for policies that throttle arrivals (else None)."""
        return None

    def update_throttle(self, changes: dict) -> None:
        """Apply checked ``SettingsUpdate.throttle`` changes (policies that throttle)."""
        raise OptionError(f"policy {self.name} does not throttle; throttle limits apply to fairserve")

    def forget(self, client: str) -> None:
        """Drop all state of an idle client."""


def _arrival(req: TrackedRequest) -> int:
    return req.seq


def longest_prefix_first(req: TrackedRequest) -> tuple[int, int]:
    return (-req.cached_len, req.seq)
