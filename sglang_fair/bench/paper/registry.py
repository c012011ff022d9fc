"""Every paper's figures by name, in the paper's order."""

from __future__ import annotations

from sglang_fair.bench.paper import apps, apps_engine, dlpm_sweeps, dlpm_traces, vtc
from sglang_fair.bench.paper.figure import Figure


def _ordered(*groups: list[Figure]) -> dict[str, Figure]:
    figs = [f for g in groups for f in g]
    # Numbered figures in number order, named ones (e.g. "abuse") after them.
    key = (lambda f: (not f.name.isdigit(), int(f.name) if f.name.isdigit() else 0, f.name))
    return {f.name: f for f in sorted(figs, key=key)}


PAPERS: dict[str, dict[str, Figure]] = {
    "dlpm": _ordered(dlpm_sweeps.FIGURES, dlpm_traces.FIGURES),
    "vtc": _ordered(vtc.FIGURES),
    "fairserve": _ordered(apps.FAIRSERVE, apps_engine.FAIRSERVE),
    "justitia": _ordered(apps.JUSTITIA, apps_engine.JUSTITIA),
}


class UnknownName(ValueError):
    pass


def figures(paper: str, names: list[str] | None) -> list[Figure]:
    """The named figures of ``paper`` (all of them for None); unknown names list the valid ones."""
    if paper not in PAPERS:
        raise UnknownName(f"unknown paper {paper!r}; papers: {', '.join(PAPERS)} (or 'all')")
    figs = PAPERS[paper]
    if names is None:
        return list(figs.values())
    wanted = [n.removeprefix("fig") for n in names]
    bad = [n for n in wanted if n not in figs]
    if bad:
        raise UnknownName(f"paper {paper!r} has no figure {', '.join(repr(b) for b in bad)}; "
                          f"its figures: {', '.join(figs)}")
    return [figs[n] for n in dict.fromkeys(wanted)]
