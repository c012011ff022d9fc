"""PNG plots of one run (like the DLPM paper's Fig. 9) and of a comparison."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; never needs a display
import matplotlib.pyplot as plt  # noqa: E402

from sglang_fair.runs.records import RequestRecord  # noqa: E402


def _series(rows: list[dict], key: str) -> dict[str, tuple[list[float], list[float]]]:
    out: dict[str, tuple[list[float], list[float]]] = {}
    for r in rows:
        xs, ys = out.setdefault(r["client"], ([], []))
        xs.append(r["window_end_s"])
        ys.append(r[key])
    return out


def _label(client: str, well_behaved: dict[str, bool]) -> str:
    return client if well_behaved.get(client, True) else f"{client} (misbehaving)"


def plot_run(records: list[RequestRecord], rows: list[dict], well_behaved: dict[str, bool],
             title: str, out_dir: Path) -> list[Path]:
    """response_time.png, service_rate.png, cumulative_service.png in ``out_dir``."""
    paths = []
    fig, ax = plt.subplots(figsize=(8, 4))
    for client in sorted({r.client for r in records}):
        done = sorted((r for r in records if r.client == client and r.ok and r.t_done is not None),
                      key=lambda r: r.t_done)
        ax.plot([r.t_done for r in done], [r.t_done - r.t_sent for r in done], ".", markersize=3,
                label=_label(client, well_behaved))
    ax.set(xlabel="time (s)", ylabel="response time (s)", title=f"{title}: per-request response time")
    paths.append(_save(fig, ax, out_dir / "response_time.png"))
    for key, ylabel, name in (("service_rate", "service rate (weighted tokens/s)", "service_rate.png"),
                              ("cumulative_service", "cumulative service (weighted tokens)", "cumulative_service.png")):
        fig, ax = plt.subplots(figsize=(8, 4))
        for client, (xs, ys) in _series(rows, key).items():
            ax.plot(xs, ys, label=_label(client, well_behaved))
        ax.set(xlabel="time (s)", ylabel=ylabel, title=f"{title}: {key.replace('_', ' ')}")
        paths.append(_save(fig, ax, out_dir / name))
    return paths


def _slowest_well_behaved_wait(summary: dict) -> float | None:
    """The longest single-request latency any well-behaved client saw: the wait a tenant feels."""
    waits = [c["request_latency_s"]["max"] for c in summary["clients"].values()
             if c.get("well_behaved", True) and c["request_latency_s"]["max"] is not None]
    return max(waits) if waits else None


# (title, y label, which way is better, value)
COMPARE_METRICS = (
    ("throughput", "service/s (weighted tokens)", "higher", lambda s: s["overall"]["throughput"]["service_per_s"]),
    ("Jain's index (all active)", "index (1 = equal shares)", "higher", lambda s: s["overall"]["jain_index"]),
    ("well-behaved P50 latency", "program latency (s)", "lower",
     lambda s: s["overall"]["well_behaved_program_latency_s"]["p50"]),
    ("well-behaved P99 latency", "program latency (s)", "lower",
     lambda s: s["overall"]["well_behaved_program_latency_s"]["p99"]),
    ("slowest well-behaved request", "its latency (s)", "lower", _slowest_well_behaved_wait),
)


def plot_compare(labels: list[str], summaries: list[dict], path: Path) -> Path:
    fig, axes = plt.subplots(1, len(COMPARE_METRICS), figsize=(3.6 * len(COMPARE_METRICS), 4.2))
    for ax, (name, ylabel, better, get) in zip(axes, COMPARE_METRICS):
        values = [get(s) for s in summaries]
        ax.bar(range(len(labels)), [v if v is not None else 0.0 for v in values])
        ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right")
        ax.set_title(f"{name}\n({better} is better)", fontsize=10)
        ax.set_ylabel(ylabel)
        ax.grid(axis="y", alpha=0.3)
    simulated = [label for label, s in zip(labels, summaries) if s["run"].get("backend") == "sim"]
    if simulated:
        kind = "simulated runs" if len(simulated) == len(labels) else f"simulated: {', '.join(simulated)}"
        fig.suptitle(f"{kind} (cost model of a GPU, not measured)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _save(fig, ax, path: Path) -> Path:
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
