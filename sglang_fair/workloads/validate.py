"""Checks that a Workload can be replayed before any request is sent."""

from __future__ import annotations

import math

from sglang_fair.workloads.model import Workload


class WorkloadError(ValueError):
    """A workload (or its parameters) that cannot be replayed."""


def check_workload(workload: Workload) -> None:
    """Raise WorkloadError naming the first bad program or call.

    Parents must come earlier in ``calls`` than their children, so any
    program is a DAG that a replayer can walk in index order.
    """
    if not workload.programs:
        raise WorkloadError(f"workload {workload.name!r} has no programs")
    seen: set[str] = set()
    for p in workload.programs:
        where = f"program {p.program_id!r}"
        if p.program_id in seen:
            raise WorkloadError(f"{where}: duplicate program_id")
        seen.add(p.program_id)
        if not p.calls:
            raise WorkloadError(f"{where}: no calls")
        if not (math.isfinite(p.arrival) and p.arrival >= 0):
            raise WorkloadError(f"{where}: arrival must be a finite number >= 0, got {p.arrival}")
        for i, c in enumerate(p.calls):
            if c.max_new_tokens < 1:
                raise WorkloadError(f"{where} call {i}: max_new_tokens must be >= 1, got {c.max_new_tokens}")
            if not c.tokens and not c.extends_parent:
                raise WorkloadError(f"{where} call {i}: empty prompt")
            if any(not (0 <= q < i) for q in c.parents):
                raise WorkloadError(f"{where} call {i}: parents {c.parents} must be earlier calls of the program")
            if c.extends_parent and not c.parents:
                raise WorkloadError(f"{where} call {i}: extends_parent without a parent")
