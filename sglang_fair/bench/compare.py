"""Side-by-side comparison of run directories: a text table and one plot."""

from __future__ import annotations

from pathlib import Path

from sglang_fair.bench.output import read_summary
from sglang_fair.bench.plots import plot_compare

COLUMNS = (
    ("run", lambda s: s["_label"]),
    ("policy", lambda s: s["run"].get("policy") or "-"),
    ("ok/total", lambda s: f"{s['overall']['requests_ok']}/{s['overall']['requests']}"),
    ("dur s", lambda s: s["overall"]["duration_s"]),
    ("service/s", lambda s: s["overall"]["throughput"]["service_per_s"]),
    ("out tok/s", lambda s: s["overall"]["throughput"]["output_tokens_per_s"]),
    ("jain", lambda s: s["overall"]["jain_index"]),
    ("p50 prog s", lambda s: s["overall"]["program_latency_s"]["p50"]),
    ("mean prog s", lambda s: s["overall"]["program_latency_s"]["mean"]),
    ("throttled", lambda s: s["overall"].get("requests_throttled")),  # absent in older summaries
    ("wasted tok", lambda s: s["overall"].get("wasted_tokens")),
    ("wb p50 s", lambda s: s["overall"]["well_behaved_program_latency_s"]["p50"]),
    ("wb p99 s", lambda s: s["overall"]["well_behaved_program_latency_s"]["p99"]),
    ("ttft p50 s", lambda s: s["overall"]["ttft_s"]["p50"]),
    ("cache hit", lambda s: s["overall"]["cache_hit_rate"]),
    ("max diff", lambda s: s["overall"]["max_backlogged_service_diff"]),
    ("partial", lambda s: "yes" if s["run"].get("partial") else "no"),
)


def _cell(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3f}" if abs(v) < 100 else f"{v:.0f}"
    return str(v)


def table(summaries: list[dict]) -> str:
    """A Markdown table, one row per run."""
    rows = [[_cell(get(s)) for _, get in COLUMNS] for s in summaries]
    head = [name for name, _ in COLUMNS]
    widths = [max(len(h), *(len(r[k]) for r in rows)) for k, h in enumerate(head)]
    line = lambda cells: "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    return "\n".join([line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])


def compare_runs(dirs: list[Path], plot_path: Path) -> str:
    summaries = []
    for d in dirs:
        s = read_summary(d)
        s["_label"] = d.name
        summaries.append(s)
    plot_compare([s["_label"] for s in summaries], summaries, plot_path)
    return table(summaries)
