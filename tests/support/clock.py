"""A clock a test sets by hand, for code that takes ``clock: Callable[[], float]``."""

from __future__ import annotations


class FakeClock:
    """Reads ``now``; a test moves it (``clock.now = 5.0`` or ``clock.advance(0.1)``)."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now
