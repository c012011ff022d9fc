"""A clock that copies of a scheduler read alike: the latest time stamp they were given.

Tensor-parallel ranks each hold a copy of the ``FairScheduler`` and must take
the same decisions, but each rank's own clock reads differently (up to
~100 ms apart, by when the rank gets to an event). Fed the same stamps (one
process's readings, sent to every copy) at the same points of the event
sequence, every copy reads the same time at every point; it advances only
with the stamps.
"""

from __future__ import annotations


class StampClock:
    def __init__(self) -> None:
        self.now = 0.0

    def observe(self, stamp: float) -> None:
        """A stamp arrived; one taken a little earlier may come later, so time never goes back."""
        if stamp > self.now:
            self.now = stamp

    def __call__(self) -> float:
        return self.now
