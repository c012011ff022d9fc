"""What a person reads at the end of a run: each client's outcome, the overall figures, a verdict."""

from __future__ import annotations

from pathlib import Path

from sglang_fair.bench.audit import audit_fields

GLOSSARY = ("service: input + 2 x output tokens; done: median time to finish one of the client's call chains; "
            "wait: the longest any one request of the client took.")


def _fmt(value: float | None, unit: str = "") -> str:
    return "-" if value is None else f"{value:,.1f}{unit}"


def client_table(summaries: dict[str, dict]) -> str:
    """One row per client, each run's service, median chain time and longest wait side by side."""
    labels = list(summaries)
    clients = list(next(iter(summaries.values()))["clients"])
    head = f"{'client':<10} {'behaves':<8}" + "".join(
        f" | {label + ' service':>13} {label + ' done':>9} {label + ' wait':>9}" for label in labels)
    rows = [head, "-" * len(head)]
    for client in clients:
        info = summaries[labels[0]]["clients"][client]
        row = f"{client:<10} {'yes' if info['well_behaved'] else 'NO':<8}"
        for label in labels:
            c = summaries[label]["clients"][client]
            done, wait = c["program_latency_s"]["p50"], c["request_latency_s"]["max"]
            row += f" | {_fmt(c['service']):>13} {_fmt(done, 's'):>9} {_fmt(wait, 's'):>9}"
        rows.append(row)
    return "\n".join(rows)


def overall_line(label: str, summary: dict) -> str:
    o = summary["overall"]
    return (f"{label}: Jain {_fmt(o['jain_index'])}, cache hit rate {_fmt((o.get('cache_hit_rate') or 0) * 100, '%')}, "
            f"{o['requests_ok']}/{o['requests']} requests ok")


def verdict(run_dir: Path) -> str:
    """The fairness audit of ``run_dir`` in one line, or why it cannot be audited."""
    a = audit_fields(run_dir)
    if "audit_error" in a:
        return f"fairness audit: not possible: {a['audit_error']}"
    within = "within the bound" if a["within"] else "OUTSIDE the bound"
    return (f"fairness audit: largest service gap {a['gap']:,.0f} vs bound {a['bound']:,.0f} "
            f"({a['bound_name']}): {within}")
