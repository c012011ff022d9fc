"""What the figures share: simulating one named system on a workload (a run directory each),
merging and shifting workloads, per-client response times and service over time, the plots."""

from __future__ import annotations

import logging
import math
from dataclasses import replace
from pathlib import Path

from sglang_fair.bench.paper.figure import FigureRun
from sglang_fair.bench.paper_grid import SYSTEMS, run_one, waiting_share
from sglang_fair.runs.records import RequestRecord
from sglang_fair.workloads.model import Program, Workload
from sglang_fair.workloads.registry import build_workload
from sglang_fair.workloads.spec import parse_scenario

W_INPUT, W_OUTPUT = 1.0, 2.0  # service of a token, as everywhere in the repo (docs/metrics.md)

# Quick mode: a smaller simulated GPU (fewer running requests, a smaller KV pool) so a few
# hundred requests overload it and a figure takes seconds; its numbers are not the paper's.
QUICK_SIM = {"kv_pool_tokens": 40_000, "max_running_requests": 48}


def simulate(ctx: FigureRun, wl: Workload, system: str, workers: int = 1, fair: dict | None = None,
             router_options: dict | None = None, **sim: object) -> dict:
    """One system on ``wl``, written as ``<figure dir>/<system>/``; the row keeps the records.

    ``system`` is a local policy at D = 1 or a name of paper_grid.SYSTEMS at D > 1."""
    logging.getLogger("sglang_fair.sim.backend").setLevel(logging.ERROR)  # extrapolation is in the row
    if workers > 1:
        policy, router, opts = SYSTEMS[system]
        opts = opts | (router_options or {})
    else:
        policy, router, opts = system, "round_robin", {}
    sim = (QUICK_SIM if ctx.quick else {}) | sim
    ctx.log(f"simulating {system} (D={workers}) on {wl.name}: {len(wl.programs)} programs, {wl.num_calls()} calls")
    row = run_one(wl, policy, router, workers, ctx.opts.seed, fair=fair, router_options=opts,
                  run_dir=ctx.dir / system.replace("+", "-"), keep_records=True, **sim)
    ctx.log(f"  {system}: {row['ok']}/{row['requests']} ok, {row['throughput']:,.0f} service/s, "
            f"{row['wall_s']:.1f} s wall")
    return row


def scenario(raw: dict, seed: int) -> Workload:
    """A workload from a scenario mapping (the configs' YAML schema)."""
    return build_workload(parse_scenario(raw, source=raw.get("name", "<paper>"), seed=seed))


def merge(name: str, *parts: Workload, shifts: tuple[float, ...] = ()) -> Workload:
    """One workload of several, part k shifted by shifts[k] seconds; ids kept unique by part."""
    programs: list[Program] = []
    for k, wl in enumerate(parts):
        dt = shifts[k] if k < len(shifts) else 0.0
        programs += [replace(p, program_id=f"{p.program_id}.{k}", arrival=p.arrival + dt) for p in wl.programs]
    programs.sort(key=lambda p: (p.arrival, p.program_id))
    return Workload(name=name, programs=programs, seed=parts[0].seed, meta=dict(parts[0].meta))


def response_times(records: list[RequestRecord], clients: list[str] | None = None) -> list[float]:
    """Per-request response time (done - sent) of the clients' successful requests."""
    return [r.t_done - r.t_sent for r in records
            if r.ok and r.t_done is not None and (clients is None or r.client in clients)]


def percentile(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, math.ceil(q / 100 * len(s)) - 1))]


def end_to_end(records: list[RequestRecord]) -> float | None:
    """When the last request finished: the paper's end-to-end completion time of all programs."""
    done = [r.t_done for r in records if r.ok and r.t_done is not None]
    return max(done) if done else None


def service(r: RequestRecord) -> float:
    return W_INPUT * r.prompt_tokens + W_OUTPUT * r.output_tokens


def service_in(records: list[RequestRecord], a: float, b: float) -> dict[str, float]:
    """Service per client of the requests that finished in [a, b), per second."""
    out: dict[str, float] = {}
    for r in records:
        if r.ok and r.t_done is not None and a <= r.t_done < b:
            out[r.client] = out.get(r.client, 0.0) + service(r)
    return {c: v / (b - a) for c, v in out.items()} if b > a else {}


def service_series(records: list[RequestRecord], window: float) -> dict[str, tuple[list[float], list[float]]]:
    """Per client: window mid-points and the service per second finished in each window."""
    end = end_to_end(records) or 0.0
    n = max(1, math.ceil(end / window))
    out: dict[str, tuple[list[float], list[float]]] = {}
    clients = sorted({r.client for r in records})
    for c in clients:
        ys = [0.0] * n
        for r in records:
            if r.client == c and r.ok and r.t_done is not None:
                ys[min(n - 1, int(r.t_done // window))] += service(r) / window
        out[c] = ([(k + 0.5) * window for k in range(n)], ys)
    return out


def plot_traces(runs: dict[str, dict], path: Path, title: str, window: float) -> None:
    """The paper's time-series form (DLPM Figs. 8, 9, 12): per system a column, response time
    of each request at its send time (top) and each client's service rate (bottom)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(runs), figsize=(4 * len(runs), 6), squeeze=False, sharey="row")
    for k, (name, row) in enumerate(runs.items()):
        recs = row["records"]
        clients = sorted({r.client for r in recs})
        for i, c in enumerate(clients):
            pts = [(r.t_sent, r.t_done - r.t_sent) for r in recs if r.client == c and r.ok and r.t_done is not None]
            # Well-behaved clients (listed first) on top: the flooders' points would hide them.
            axes[0][k].scatter([p[0] for p in pts], [p[1] for p in pts], s=3, color=f"C{i}", label=c,
                               zorder=len(clients) - i)
            xs, ys = service_series([r for r in recs if r.client == c], window)[c] if pts else ([], [])
            axes[1][k].plot(xs, ys, color=f"C{i}", label=c)
        axes[0][k].set_title(name)
        axes[1][k].set_xlabel("time (s)")
    axes[0][0].set_ylabel("response time (s)")
    axes[1][0].set_ylabel("service rate (service/s)")
    axes[0][0].legend(fontsize=7, markerscale=3)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_service_rates(runs: dict[str, dict], path: Path, title: str, window: float) -> None:
    """VTC §5's form: each client's received service rate over time, one panel per system."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(runs), figsize=(4.5 * len(runs), 3.5), squeeze=False, sharey=True)
    for k, (name, row) in enumerate(runs.items()):
        for i, (c, (xs, ys)) in enumerate(service_series(row["records"], window).items()):
            axes[0][k].plot(xs, ys, color=f"C{i}", label=c)
        axes[0][k].set_title(name)
        axes[0][k].set_xlabel("time (s)")
    axes[0][0].set_ylabel("received service rate (service/s)")
    axes[0][0].legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def backlogged(records: list[RequestRecord], clients: list[str]) -> float | None:
    """Mean share of the run the clients had a request waiting for admission (were backlogged)."""
    return waiting_share(records, (0.0, end_to_end(records) or 0.0), clients)
