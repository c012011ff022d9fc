"""The claims table: per figure, the paper's claim, the metric that tests it, the target, our
number, and held / not held with the measured reason. Every number comes from a run; a row
whose metric could not be measured says so (held = None) rather than guessing."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

OPS = {"<=": lambda a, b: a <= b, ">=": lambda a, b: a >= b}


@dataclass(frozen=True)
class Check:
    """One comparison: ``value op target`` (e.g. D2LPM / VTC end-to-end time <= 0.7)."""

    metric: str
    value: float | None
    op: str
    target: float
    # A precondition (e.g. "the flooders were backlogged"): when it fails, the figure could not
    # show the claim at this scale, and the row says so instead of holding or refuting it.
    pre: bool = False

    def __post_init__(self) -> None:
        if self.op not in OPS:
            raise ValueError(f"op must be one of {sorted(OPS)}, got {self.op!r}")

    @property
    def held(self) -> bool | None:
        if self.value is None or not math.isfinite(self.value):
            return None  # not measured: neither held nor refuted
        return bool(OPS[self.op](self.value, self.target))

    def text(self) -> str:
        return f"{self.metric} = {_num(self.value)}"


@dataclass(frozen=True)
class ClaimRow:
    paper: str
    figure: str
    claim: str
    metric: str
    target: str
    ours: str
    held: bool | None
    reason: str
    setup: str  # the paper's testbed against ours: the assumption a reader needs
    run_dir: str
    quick: bool
    checks: list[dict] = field(default_factory=list)


def evaluate(checks: list[Check]) -> tuple[bool | None, str]:
    """Held when every check holds; not held (with the failing measurements) when one fails;
    None when none fails but one could not be measured."""
    if not checks:
        return None, "nothing measured"
    unmet = [c for c in checks if c.pre and c.held is not True]
    if unmet:
        return None, "not shown at this scale: " + "; ".join(
            f"{c.metric} = {_num(c.value)}, not {c.op} {c.target:g}" for c in unmet)
    failed = [c for c in checks if c.held is False]
    if failed:
        return False, "; ".join(f"{c.metric} = {_num(c.value)}, not {c.op} {c.target:g}" for c in failed)
    missing = [c for c in checks if c.held is None]
    if missing:
        return None, "not measured: " + ", ".join(c.metric for c in missing)
    return True, ""


def make_row(paper: str, figure: str, claim: str, checks: list[Check], setup: str, run_dir: Path,
             quick: bool, note: str = "") -> ClaimRow:
    held, reason = evaluate(checks)
    if note:
        reason = f"{reason}; {note}" if reason else note
    return ClaimRow(paper=paper, figure=figure, claim=claim,
                    metric="; ".join(c.metric for c in checks),
                    target="; ".join(f"{c.op} {c.target:g}" for c in checks),
                    ours="; ".join(_num(c.value) for c in checks), held=held, reason=reason, setup=setup,
                    run_dir=str(run_dir), quick=quick,
                    checks=[asdict(c) | {"held": c.held} for c in checks])


def _num(x: float | None) -> str:
    if x is None:
        return "n/a"
    if not math.isfinite(x):
        return str(x)
    return f"{x:.3g}" if abs(x) < 1000 else f"{x:,.0f}"


def _cell(s: str) -> str:
    return s.replace("|", "/").replace("\n", " ")


def verdict(held: bool | None) -> str:
    return {True: "held", False: "not held", None: "not shown"}[held]


def markdown(rows: list[ClaimRow]) -> str:
    lines = ["| paper | figure | claim | metric | target | ours | verdict | reason | setup |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append("| " + " | ".join(_cell(x) for x in (
            r.paper, r.figure, r.claim, r.metric, r.target, r.ours, verdict(r.held), r.reason or "-", r.setup)) + " |")
    scale = ("quick (small scale: not the paper's numbers)" if any(r.quick for r in rows)
             else "full scale (each row's setup says what ran)")
    n = sum(r.held is True for r in rows)
    return "\n".join(lines) + f"\n\n{n} of {len(rows)} claims held; {scale}.\n"


def write_claims(rows: list[ClaimRow], out: Path) -> tuple[Path, Path]:
    """``out/claims.md`` and ``out/claims.json``."""
    out.mkdir(parents=True, exist_ok=True)
    md, js = out / "claims.md", out / "claims.json"
    md.write_text("# Claims\n\n" + markdown(rows))
    js.write_text(json.dumps([asdict(r) for r in rows], indent=1) + "\n")
    return md, js


def read_claims(path: Path) -> list[ClaimRow]:
    return [ClaimRow(**r) for r in json.loads(path.read_text())]
