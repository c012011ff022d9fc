"""``python -m sglang_fair.bench paper <paper|all> (--figure N ... | --all) [--quick]``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sglang_fair.bench.paper.claims import markdown, write_claims
from sglang_fair.bench.paper.figure import PaperOptions, run_figures
from sglang_fair.bench.paper.registry import PAPERS, UnknownName, figures
from sglang_fair.testing.server import ServerStartError


def add_parser(sub) -> argparse.ArgumentParser:
    listing = "; ".join(f"{p}: {', '.join(f)}" for p, f in PAPERS.items())
    p = sub.add_parser("paper", help="reproduce a paper's evaluation on the simulator (FairServe's and Justitia's "
                                     "also on the real engine), with a claims table",
                       description=f"Figures: {listing}. Writes <out>/<paper>/fig<N>/ (runs, plot, claims row), "
                                   "<out>/<paper>/claims.md|json and, for several papers, <out>/claims.md|json. "
                                   "Figures named *-engine start real tiny CPU servers, one after the other.")
    p.add_argument("paper", help=f"one of {', '.join(PAPERS)}, or 'all'")
    p.add_argument("--figure", action="append", default=None, metavar="N",
                   help="figure to run (repeatable), e.g. 8 or fig8")
    p.add_argument("--all", action="store_true", help="every figure of the paper")
    p.add_argument("--quick", action="store_true", help="small scale, seconds per figure (not the paper's numbers)")
    p.add_argument("--out", default="runs/paper", help="output root (default runs/paper)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-progress", action="store_true", help="no progress lines")
    return p


def cmd_paper(args) -> int:
    papers = list(PAPERS) if args.paper == "all" else [args.paper]
    if args.paper == "all" and args.figure:
        raise UnknownName("'all' runs every figure of every paper; give one paper with --figure")
    if args.paper != "all" and not args.figure and not args.all:
        names = ", ".join(PAPERS.get(args.paper, {})) or "?"
        figures(args.paper, [])  # unknown paper: its own error first
        raise UnknownName(f"give --figure N or --all; figures of {args.paper}: {names}")
    plan = {p: figures(p, None if (args.all or args.paper == "all") else args.figure) for p in papers}
    opts = PaperOptions(out=Path(args.out), quick=args.quick, seed=args.seed, progress=not args.no_progress)
    rows = []
    try:
        for paper, figs in plan.items():
            rows += run_figures(paper, figs, opts)
    except ServerStartError as e:  # a figure replayed on the real engine
        print(f"error: a server did not start: {e}", file=sys.stderr)
        return 1
    if len(plan) > 1:
        md, _ = write_claims(rows, opts.out)
        print(f"wrote {md}", file=sys.stderr)
    print(markdown(rows))
    return 0
