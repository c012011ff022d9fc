"""Virtual time of a fluid fair-share (GPS) reference system (Justitia §IV-C).

Each job (an application run) enters with a virtual finish time
``F = V(a) + C / w`` and stays active in the reference system until V reaches
F. Between such departures V grows by the delivered service divided by the
total weight of active jobs. When the server is saturated it delivers M
units per unit time, so this is the paper's dV/dt = M / N_t (weights 1)
without having to know M or the step time; when it is not saturated V
follows what was actually delivered. Finish times never change once set, so
ordering by F needs no refresh when jobs arrive or leave.
"""

from __future__ import annotations

import heapq


class VirtualClock:
    def __init__(self) -> None:
        self.now = 0.0  # V
        self._active: list[tuple[float, int, float]] = []  # heap of (F, id, weight)
        self._weight = 0.0  # sum of weights of active jobs
        self._ids = 0

    @property
    def active(self) -> int:
        """Jobs still unfinished in the reference system."""
        return len(self._active)

    def arrive(self, cost: float, weight: float = 1.0) -> float:
        """A job of ``cost`` service arrives now; returns its virtual finish time."""
        if not cost >= 0 or cost == float("inf"):
            raise ValueError(f"job cost must be a finite number >= 0, got {cost!r}")
        if not weight > 0:
            raise ValueError(f"job weight must be > 0, got {weight!r}")
        finish = self.now + cost / weight
        self._ids += 1
        heapq.heappush(self._active, (finish, self._ids, weight))
        self._weight += weight
        self._depart_due()
        return finish

    def advance(self, service: float) -> None:
        """``service`` units were delivered (to any job) since the last call."""
        while service > 0 and self._active:
            finish = self._active[0][0]
            need = (finish - self.now) * self._weight
            if service < need:
                self.now += service / self._weight
                return
            service -= max(need, 0.0)
            self.now = max(self.now, finish)
            self._depart_due()

    def _depart_due(self) -> None:
        while self._active and self._active[0][0] <= self.now:
            _, _, weight = heapq.heappop(self._active)
            self._weight -= weight
        if not self._active:
            self._weight = 0.0  # no drift from repeated float subtraction
