"""Iteration times from the cost model: prefill batches (with mixed decode rows) and decode segments.

Decode steps run in segments: between two events (a finish, memory running
out, or an arrival the loop would see) every step does the same thing, so a
segment of k steps is timed in closed form. A segment can be cut short at the
step boundary after an arrival.
"""

from __future__ import annotations

from dataclasses import dataclass

from sglang_fair.sim.costmodel import CostModel
from sglang_fair.sim.worker.request import SimRequest


@dataclass
class DecodeSegment:
    start: float
    steps: int
    batch: int
    ctx0: int  # KV tokens of the batch at its first step
    interruptible: bool


class StepTimer:
    def __init__(self, cost: CostModel) -> None:
        self.cost = cost

    def prefill_ms(self, batch: list[SimRequest]) -> float:
        """Before allocation: each request extends from ``computed`` to ``target``."""
        return self.cost.prefill_ms([(r.target - r.computed, r.computed) for r in batch])

    def prefill_end(self, now: float, prefill_ms: float, decoded: list[SimRequest]) -> float:
        """End of a prefill iteration that also decodes ``decoded`` one step (mixed chunk)."""
        ms = prefill_ms
        if decoded:
            ms += self.cost.mixed_decode_ms(len(decoded), sum(r.computed + r.private for r in decoded))
        return now + ms / 1000.0

    def decode_segment(self, now: float, steps: int, batch: int, ctx0: int,
                       interruptible: bool) -> tuple[DecodeSegment, float]:
        """A segment of ``steps`` decode steps from ``now``, and its end."""
        end = now + self.cost.decode_steps_ms(batch, ctx0, steps) / 1000.0
        return DecodeSegment(now, steps, batch, ctx0, interruptible), end

    def cut(self, seg: DecodeSegment, at: float) -> float | None:
        """Shorten ``seg`` to end at the first step boundary after ``at``; None when that is its end."""
        d = self.cost.profile.decode
        step0 = (d.a + d.b * seg.batch + d.c * seg.ctx0) / 1000.0
        grow = d.c * seg.batch / 1000.0
        t, k = seg.start, 0
        while t <= at and k < seg.steps:  # boundaries are few hundred at most
            t += step0 + grow * k
            k += 1
        if k >= seg.steps:
            return None
        seg.steps = k
        return t

    def token_ms(self, seg: DecodeSegment) -> float:
        """Each decoded token's step time over the segment, summed (``WorkerStats.decode_token_ms``)."""
        return seg.batch * self.cost.decode_series_ms(seg.batch, seg.ctx0, seg.steps)
