"""``python -m sglang_fair.bench audit RUN_DIR ...``: hold a run against its fairness bound.

For every pair of clients the largest |W_f(t1, t2) - W_g(t1, t2)| over the
intervals in which both have a request waiting for admission is computed
exactly on the event times (sglang_fair/metrics/backlog.py) and compared with
the bound of the run's configuration (sglang_fair/metrics/bounds.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from sglang_fair.bench.output import RECORDS, SUMMARY, read_records, read_summary
from sglang_fair.metrics.backlog import MissingAuditData, ServiceGap, max_backlogged_gap
from sglang_fair.metrics.bounds import GLOBAL_ROUTER, Bound, BoundError, bound_for

# Relative slack for float round-off when comparing with the bound.
_TOLERANCE = 1e-9


class AuditError(ValueError):
    """A directory that cannot be audited; the message names the problem."""


@dataclass
class Audit:
    run_dir: Path
    label: str  # policy, router, workers
    bound: Bound
    gap: ServiceGap
    l_input: int
    notes: list[str] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        return self.gap.value / self.bound.value if self.bound.value > 0 else float("inf")

    @property
    def violated(self) -> bool:
        return self.gap.value > self.bound.value * (1 + _TOLERANCE)

    def to_dict(self) -> dict:
        return {
            "run_dir": str(self.run_dir), "configuration": self.label,
            "bound": {"name": self.bound.name, "theorem": self.bound.theorem, "value": self.bound.value,
                      "formula": self.bound.formula,
                      "service": {"w_input": self.bound.measure.w_input, "w_output": self.bound.measure.w_output,
                                  "input": self.bound.measure.input_mode}},
            "l_input": self.l_input, "observed": self.gap.value, "ratio": self.ratio, "violated": self.violated,
            "worst_pair": list(self.gap.clients) if self.gap.clients else None,
            "worst_interval_s": list(self.gap.interval) if self.gap.interval else None,
            "notes": self.notes,
        }


def audit_run(run_dir: Path) -> Audit:
    """Audit one run directory; raises AuditError naming what is missing."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise AuditError(f"{run_dir}: not a directory")
    for name in (SUMMARY, RECORDS):
        if not (run_dir / name).is_file():
            raise AuditError(f"{run_dir}: not a run directory (no {name})")
    summary = read_summary(run_dir)
    params = summary.get("run", {}).get("params")
    if not params:
        raise AuditError(f"{run_dir}: {SUMMARY} has no run.params (written before runs recorded their policy "
                         "parameters); rerun it")
    records = read_records(run_dir)
    ok = [r for r in records if r.ok]
    if len({r.client for r in ok}) < 2:
        raise AuditError(f"{run_dir}: fewer than two clients finished a request; there is no pair to compare")
    l_input = max(r.prompt_tokens for r in ok)
    max_output = max(r.output_tokens for r in ok)
    try:
        bound = bound_for(params, l_input, max_output)
        gap = max_backlogged_gap(records, bound.measure)
    except (BoundError, MissingAuditData) as e:
        raise AuditError(f"{run_dir}: {e}") from e
    label = f"{params.get('policy')}, D={params.get('num_workers')}"
    router = params.get("router")
    if router and ((params.get("num_workers") or 1) > 1 or router == GLOBAL_ROUTER):
        label += f", router {router}"
    return Audit(run_dir, label, bound, gap, l_input, _notes(summary, records))  # type: ignore[arg-type]


def audit_fields(run_dir: Path) -> dict:
    """``audit_run`` as flat fields for a benchmark's table row; ``audit_error`` when it cannot be audited."""
    try:
        a = audit_run(run_dir)
    except AuditError as e:
        return {"audit_error": str(e)}
    return {"gap": a.gap.value, "bound": a.bound.value, "bound_name": a.bound.name, "theorem": a.bound.theorem,
            "within": not a.violated, "worst_pair": a.gap.clients, "audit_notes": a.notes}


def _notes(summary: dict, records: list) -> list[str]:
    notes = []
    if summary.get("run", {}).get("partial"):
        notes.append("the run is partial: failed requests count no service and no backlog after admission")
    unknown = sum(max(0, (r.retractions or 0) - len(r.requeues)) for r in records)
    if unknown:
        notes.append(f"{unknown} retractions have no times (the server reports only their count): "
                     "the waiting after them is not counted as backlog")
    return notes


def format_table(audits: list[Audit]) -> str:
    lines = []
    for a in audits:
        verdict = "VIOLATED" if a.violated else "within bound"
        pair = " vs ".join(a.gap.clients) if a.gap.clients else "-"
        interval = f"[{a.gap.interval[0]:.3f}, {a.gap.interval[1]:.3f}] s" if a.gap.interval else "-"
        m = a.bound.measure
        lines += [
            f"{a.run_dir}  ({a.label})",
            f"  bound     {a.bound.name}: {a.bound.formula} = {a.bound.value:,.1f}",
            f"  service   {m.w_input:g} x {m.input_mode} tokens at admission + {m.w_output:g} x output tokens "
            f"as produced; L_input = {a.l_input}",
            f"  observed  max |W_f - W_g| over both-backlogged intervals = {a.gap.value:,.1f}",
            f"  ratio     {a.ratio:.3f}  ->  {verdict}",
            f"  worst     {pair}, {interval}",
            *(f"  note      {n}" for n in a.notes),
            "",
        ]
    return "\n".join(lines).rstrip() + "\n"


def to_json(audits: list[Audit]) -> str:
    return json.dumps([a.to_dict() for a in audits], indent=2)
