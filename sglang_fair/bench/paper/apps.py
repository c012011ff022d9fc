"""FairServe (throttling the abusive application) and Justitia (application completion times),
on one simulated H100 (Llama-3.1-8B) with the scenarios configs/apps_*.yaml and their policy
settings configs/policy_paper_scenarios.yaml. KV pools are those of the simulator results page
for these scenarios (30k tokens for the abuse scenario, 60k for Justitia's), so the scenarios'
rates overload one GPU as the papers' testbeds were. Quick mode keeps the first seconds of arrivals."""

from __future__ import annotations

from sglang_fair.bench.paper.claims import Check, ClaimRow, make_row
from sglang_fair.bench.paper.common import percentile, ratio, simulate
from sglang_fair.bench.paper.figure import Figure, FigureRun
from sglang_fair.runs.records import RequestRecord
from sglang_fair.workloads.model import Workload
from sglang_fair.workloads.registry import make_workload
from sglang_fair.workloads.spec import CONFIG_DIR

POLICY_CONFIG = str(CONFIG_DIR / "policy_paper_scenarios.yaml")
SETUP = "simulated H100, Llama-3.1-8B, KV pool {pool:,}"


def _workload(name: str, ctx: FigureRun, quick_s: float) -> Workload:
    wl = make_workload("apps", name, seed=ctx.opts.seed)
    if ctx.quick:  # the first seconds of arrivals: the same rates, fewer programs
        wl.programs = [p for p in wl.programs if p.arrival < quick_s]
    return wl


def _runs(ctx: FigureRun, wl: Workload, systems: tuple[str, ...], pool: int) -> dict[str, dict]:
    # Quick mode's small GPU caps the running requests; the pool stays the scenario's.
    return {n: simulate(ctx, wl, n, fair={"policy_config": POLICY_CONFIG}, kv_pool_tokens=pool) for n in systems}


def completion_times(records, clients: set[str] | None = None) -> dict[str, float]:
    """Per program (application run): last finish - first send, completed runs only."""
    first: dict[str, float] = {}
    last: dict[str, float] = {}
    failed: set[str] = set()
    for r in records:
        if clients is not None and r.client not in clients:
            continue
        if not r.ok or r.t_done is None:
            failed.add(r.program_id)
            continue
        first[r.program_id] = min(first.get(r.program_id, r.t_sent), r.t_sent)
        last[r.program_id] = max(last.get(r.program_id, r.t_done), r.t_done)
    return {p: last[p] - first[p] for p in last if p not in failed}


def _mean(xs) -> float | None:
    xs = list(xs)
    return sum(xs) / len(xs) if xs else None


def plot_cdf_panel(ax, records: dict[str, list[RequestRecord]], title: str, clients: set[str] | None = None) -> None:
    """One panel: each system's CDF of application completion times (``completion_times``)."""
    for name, recs in records.items():
        xs = sorted(completion_times(recs, clients).values())
        ax.plot(xs, [(k + 1) / len(xs) for k in range(len(xs))], label=name)
    ax.set_xlabel("application completion time (s)")
    ax.set_ylabel("CDF")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)


def _plot_cdf(runs: dict[str, dict], path, title: str, clients: set[str] | None = None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5))
    plot_cdf_panel(ax, {name: row["records"] for name, row in runs.items()}, title, clients)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def fairserve_checks(records: dict[str, list[RequestRecord]], benign: set[str]) -> list[Check]:
    """FairServe's abuse checks from the records of ``fairserve`` and ``vtc`` on the same workload;
    ``benign``: the well-behaved clients (every other one is the abuser)."""
    recs = records["fairserve"]

    def share(clients: set[str], want: bool) -> float | None:
        mine = [r for r in recs if (r.client in clients) == want]
        return sum(r.throttled for r in mine) / len(mine) if mine else None

    p90 = {n: percentile(list(completion_times(r, benign).values()), 90) for n, r in records.items()}
    return [Check("abuser's requests refused (share)", share(benign, False), ">=", 0.05),
            Check("benign users' requests refused (share)", share(benign, True), "<=", 0.01),
            Check("benign P90 completion, FairServe / VTC", ratio(p90["fairserve"], p90["vtc"]), "<=", 1.0)]


def justitia_checks(scenario_name: str, records: dict[str, list[RequestRecord]]
                    ) -> tuple[list[Check], dict[str, float | None]]:
    """Justitia's checks from the records of ``justitia``, ``vtc`` and ``fcfs`` on the same workload
    of ``scenario_name``, and each system's mean application completion time (s)."""
    mean = {n: _mean(completion_times(r).values()) for n, r in records.items()}
    checks = [Check("mean completion, Justitia / VTC", ratio(mean["justitia"], mean["vtc"]), "<=", 1.0),
              Check("mean completion, Justitia / FCFS", ratio(mean["justitia"], mean["fcfs"]), "<=", 1.0)]
    if scenario_name == "justitia_starvation":
        ele = {n: _mean(completion_times(r, {"elephant"}).values()) for n, r in records.items()}
        checks.append(Check("elephant's completion, Justitia / VTC", ratio(ele["justitia"], ele["vtc"]),
                            "<=", 1.0))
    return checks, mean


def fairserve_abuse(ctx: FigureRun) -> ClaimRow:
    pool = 30_000
    wl = _workload("fairserve_abuse", ctx, 10.0)
    runs = _runs(ctx, wl, ("fairserve", "vtc"), pool)
    benign = {p.client for p in wl.programs if p.well_behaved}
    _plot_cdf(runs, ctx.dir / "figabuse.png", "FairServe: benign users' interactions, abuse scenario", benign)
    checks = fairserve_checks({n: r["records"] for n, r in runs.items()}, benign)
    return make_row("fairserve", "abuse", "overload throttling refuses the abusive application, not benign users, "
                    "and keeps benign interactions fast", checks, SETUP.format(pool=pool), ctx.dir, ctx.quick)


def justitia(scenario_name: str, number: str, quick_s: float):
    def run(ctx: FigureRun) -> ClaimRow:
        pool = 60_000
        wl = _workload(scenario_name, ctx, quick_s)
        runs = _runs(ctx, wl, ("justitia", "vtc", "fcfs"), pool)
        _plot_cdf(runs, ctx.dir / f"fig{number}.png", f"Justitia: application completion times, {scenario_name}")
        checks, mean = justitia_checks(scenario_name, {n: r["records"] for n, r in runs.items()})
        note = "mean completion (s): " + ", ".join(f"{n} {v:.2f}" for n, v in mean.items() if v is not None)
        return make_row("justitia", number, "Justitia completes applications sooner on average than VTC and FCFS"
                        + (", without starving the elephant" if "starvation" in scenario_name else ""),
                        checks, SETUP.format(pool=pool), ctx.dir, ctx.quick, note=note)

    return Figure(number, scenario_name, run)


FAIRSERVE = [Figure("abuse", "apps_fairserve_abuse: throttling the abuser", fairserve_abuse)]
JUSTITIA = [justitia("justitia_mix", "mix", 8.0), justitia("justitia_starvation", "starvation", 5.0)]


