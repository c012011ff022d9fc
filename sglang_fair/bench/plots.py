"""PNG plots of one run (like the DLPM paper's Fig. 9) and of a comparison."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; never needs a display
import matplotlib.pyplot as plt  # noqa: E402

from sglang_fair.bench.records import RequestRecord  # noqa: E402


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


COMPARE_METRICS = (
    ("throughput (service/s)", lambda s: s["overall"]["throughput"]["service_per_s"]),
    ("Jain's index (all active)", lambda s: s["overall"]["jain_index"]),
    ("well-behaved P50 latency (s)", lambda s: s["overall"]["well_behaved_program_latency_s"]["p50"]),
    ("well-behaved P99 latency (s)", lambda s: s["overall"]["well_behaved_program_latency_s"]["p99"]),
)


def plot_compare(labels: list[str], summaries: list[dict], path: Path) -> Path:
    fig, axes = plt.subplots(1, len(COMPARE_METRICS), figsize=(4 * len(COMPARE_METRICS), 4))
    for ax, (name, get) in zip(axes, COMPARE_METRICS):
        values = [get(s) for s in summaries]
        ax.bar(range(len(labels)), [v if v is not None else 0.0 for v in values])
        ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right")
        ax.set_title(name, fontsize=10)
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
