"""What a figure is (its claim, its run) and how a list of them runs into run directories."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sglang_fair.bench.paper.claims import ClaimRow, read_claims, write_claims


@dataclass(frozen=True)
class PaperOptions:
    out: Path  # runs/paper by default: <out>/<paper>/fig<N>/
    quick: bool = False  # small scale: seconds per figure, for tests and a first look
    seed: int = 0
    progress: bool = True  # one line per simulated system on stderr


@dataclass(frozen=True)
class FigureRun:
    """What a figure's function gets: where to write, the scale, and a progress line printer."""

    paper: str
    figure: str
    dir: Path
    opts: PaperOptions

    @property
    def quick(self) -> bool:
        return self.opts.quick

    def log(self, msg: str) -> None:
        if self.opts.progress:
            print(f"[{self.paper} fig {self.figure}] {msg}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Figure:
    name: str  # "8", "vtc-fig3", ...
    title: str
    run: Callable[[FigureRun], ClaimRow]


def run_figures(paper: str, figures: list[Figure], opts: PaperOptions) -> list[ClaimRow]:
    """Run each figure into ``<out>/<paper>/fig<name>/``; the paper's claims next to them."""
    rows = []
    base = opts.out / paper
    for k, fig in enumerate(figures, 1):
        d = base / f"fig{fig.name}"
        d.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        ctx = FigureRun(paper, fig.name, d, opts)
        ctx.log(f"({k}/{len(figures)}) {fig.title}{' [quick]' if opts.quick else ''}")
        row = fig.run(ctx)
        write_claims([row], d)
        ctx.log(f"done in {time.perf_counter() - t0:.0f} s: {row.ours} -> "
                f"{'held' if row.held else 'not shown' if row.held is None else 'not held'}")
        rows.append(row)
    write_claims(merged(base / "claims.json", rows), base)
    return rows


def merged(path: Path, rows: list[ClaimRow]) -> list[ClaimRow]:
    """The paper's earlier rows (same scale) with this run's replacing those of the same figure,
    so figures run by separate commands still make one table."""
    try:
        old = [r for r in read_claims(path) if r.quick == rows[0].quick] if rows else []
    except (OSError, ValueError, TypeError):
        old = []  # none yet, or from another version: this run's rows alone
    new = {r.figure: r for r in rows}
    keep = [new.pop(r.figure, r) for r in old]
    return keep + list(new.values())
