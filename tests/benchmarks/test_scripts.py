"""Every script under benchmarks/ runs as its docstring says, at a tiny size (its numbers are not judged here).

The scripts whose numbers a unit test checks have their own test module
(``test_<script>.py``); this module runs the others end to end, as a user
would: ``PYTHONPATH=. python benchmarks/<speed|experiments>/<script>.py ...``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = {path.stem: path for path in (ROOT / "benchmarks").glob("*/*.py")}
TESTED_ELSEWHERE = {"dp_routers", "dp_scaling", "gpu_step_times", "router_speed", "sim_trends", "sim_variants"}


def _run(script: str, *args: str, timeout: float = 600, exit_codes: tuple[int, ...] = (0,)) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, str(SCRIPTS[script]), *args], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=timeout)
    assert run.returncode in exit_codes, run.stdout[-3000:] + run.stderr[-3000:]
    return run.stdout


def test_every_script_has_a_test() -> None:
    scripts = set(SCRIPTS)
    here = {"sim_speed", "scheduling_pass", "justitia_history", "latency_isolation_sim", "latency_isolation",
            "metrics_memory", "open_flood", "behind_gateway", "open_flood_sim", "peers_sim", "load"}
    untested = scripts - TESTED_ELSEWHERE - here
    assert not untested, f"benchmark scripts without a test: {sorted(untested)}"
    for name in TESTED_ELSEWHERE:
        assert (ROOT / "tests" / "benchmarks" / f"test_{name}.py").exists(), name


def test_sim_speed() -> None:
    out = _run("sim_speed", "--programs", "1", "--workers", "2")
    assert "simulated requests per wall-clock second" in out


@pytest.mark.engine
def test_scheduling_pass() -> None:
    out = _run("scheduling_pass", "--sizes", "8", "--reps", "1", "--policies", "lpm", "dlpm")
    assert out.splitlines()[-1].split()[0] == "8" and "dlpm=" in out


def test_justitia_history(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    subprocess.run([sys.executable, "-m", "sglang_fair.bench", "run", "--workload", "apps", "--scenario",
                    "justitia_mix", "--seed", "1", "--num-programs", "3", "--policy", "justitia", "--backend", "sim",
                    "--out", str(run_dir), "--no-progress"], cwd=ROOT, check=True, capture_output=True, timeout=300)
    history = tmp_path / "history.jsonl"
    out = _run("justitia_history", "--workload", "apps", "--scenario", "justitia_mix", "--seed", "1",
               "--run", str(run_dir), "--out", str(history))
    rows = [json.loads(line) for line in history.read_text().splitlines()]
    assert rows and f"wrote {len(rows)} application runs" in out
    assert all(row["cost"] > 0 and row["prompt"] for row in rows)


def test_latency_isolation_sim(tmp_path: Path) -> None:
    out = _run("latency_isolation_sim", "--settings", "flood+chat, 16 slots", "--json", str(tmp_path / "out.json"))
    table = json.loads((tmp_path / "out.json").read_text())
    assert list(table) == ["flood+chat, 16 slots"]
    assert set(table["flood+chat, 16 slots"]["systems"]) == {"vtc", "vtc+isolation", "dlpm", "dlpm+isolation"}
    assert "flood+chat, 16 slots" in out


@pytest.mark.server
def test_metrics_memory() -> None:
    # Exit 1 is a missed memory target (a judgement of the numbers); anything else is a broken script.
    out = _run("metrics_memory", "--ids", "20", "--idle-timeout", "3", "--concurrency", "4", exit_codes=(0, 1))
    assert "20 distinct ids, 20 answered: {200: 20}" in out
    assert "past the idle timeout vs start: rss" in out


@pytest.mark.server
def test_latency_isolation(tmp_path: Path) -> None:
    _run("latency_isolation", "--reps", "1", "--flood", "8", "--systems", "dlpm", "--json", str(tmp_path / "out.json"),
         "--log-dir", str(tmp_path / "logs"))
    table = json.loads((tmp_path / "out.json").read_text())
    assert list(table["systems"]) == ["dlpm"] and table["reps"] == 1


@pytest.mark.server
def test_load() -> None:
    out = _run("load", "--requests", "60", "--clients", "12", "--flood", "30", "--stream-share", "0.2",
               "--hangup-share", "0.1")
    assert "every request answered once (hang-ups aside), gauges at 0, healthy: PASS" in out
    assert "hung up by the client" in out and "stream: complete" in out and "plain: complete" in out
    assert "controller CPU:" in out


@pytest.mark.server
def test_open_flood(tmp_path: Path) -> None:
    # The lane system: the d2lpm cluster, its router started with the lane's options.
    _run("open_flood", "--reps", "1", "--flood", "8", "--connections", "4", "--light-tenants", "1",
         "--systems", "d2lpm+lane", "--lane-tokens", "1500", "--lane-hold-s", "5", "--json", str(tmp_path / "out.json"),
         "--log-dir", str(tmp_path / "logs"))
    out = json.loads((tmp_path / "out.json").read_text())
    tables = out["tables"]
    assert list(tables) == ["4"] and list(tables["4"]) == ["d2lpm+lane"] and out["lane_tokens"] == 1500
    # the repetition's run directory was audited against Theorem G and is within it
    audit = tables["4"]["d2lpm+lane"]["audit"]
    assert audit["within"] and audit["theorem"] and audit["bound"] and 0 <= audit["ratio"] <= 1
    run_dir = tmp_path / "logs" / "d2lpm+lane-c4-r1"
    assert (run_dir / "records.jsonl").is_file()
    params = json.loads((run_dir / "summary.json").read_text())["run"]["params"]
    assert params["router_options"]["lane_workers"] == 1 and params["router_options"]["lane_tokens"] == 1500
    assert params["router_options"]["lane_hold_s"] == 5


GATEWAYS_REQUIRED = "SGLANG_FAIR_REQUIRE_GATEWAYS"  # set by .ci/run, whose install puts the gateways in place


def _need_gateway(kind: str) -> None:
    from sglang_fair.bench.gateway import gateway_missing

    if missing := gateway_missing(kind):
        if os.environ.get(GATEWAYS_REQUIRED):
            pytest.fail(f"{GATEWAYS_REQUIRED} is set but {missing}")
        pytest.skip(missing)


@pytest.mark.server
def test_behind_gateway(tmp_path: Path) -> None:
    _need_gateway("smg")
    out = _run("behind_gateway", "--requests", "2", "--bad", "2", "--window", "4", "--variant=--disable-retries",
               "--log-dir", str(tmp_path / "logs"))
    charged = [line for line in out.splitlines() if "charged:" in line]
    assert len(charged) == 4  # two workers, two gateway settings
    # a tenant named in x-smg-routing-key (the header the gateway passes on) reaches the workers
    assert any("carol" in line for line in charged)
    assert out.count("light tenant:") == 2
    seen = _run("behind_gateway", "--forwarding", "--log-dir", str(tmp_path / "forwarding"))
    assert {line.split(":")[0] for line in seen.splitlines()} == {"/generate", "/v1/completions", "/v1/chat/completions"}
    assert all("header x-smg-routing-key passed" in line for line in seen.splitlines())
    throttled = _run("behind_gateway", "--throttled", "--bad", "4", "--requests", "2", "--variant=--disable-retries",
                     "--log-dir", str(tmp_path / "throttled")).split("== ")
    assert [block.splitlines()[0] for block in throttled[1:]] == ["gateway defaults", "--disable-retries"]
    # without retries every 429 reaches the tenant once, with its Retry-After, and the others are served
    assert ("4 requests answered {429: 4}, Retry-After passed on 4; each reached a worker 1-1 times (4 in all)"
            in throttled[2])
    assert "2 requests answered {200: 2}, 2 reached a worker" in throttled[2]


@pytest.mark.server
def test_open_flood_beside_the_peers(tmp_path: Path) -> None:
    # smg with its priority classes (a gateway in its own environment, two LPM servers behind it) and the
    # peers' routers on a --dp 2 server, each serving the flood and the light tenant end to end.
    _need_gateway("smg")
    _run("open_flood", "--reps", "1", "--flood", "8", "--connections", "4", "--light-tenants", "1",
         "--systems", "smg+priority", "gie", "dynamo", "--json", str(tmp_path / "out.json"),
         "--log-dir", str(tmp_path / "logs"))
    out = json.loads((tmp_path / "out.json").read_text())
    table = out["tables"]["4"]
    assert list(table) == ["smg+priority", "gie", "dynamo"]
    for name, row in table.items():
        assert row["requests"] >= 8 + 8 + 1, name  # the flood, the idle phase and at least one light request
    # the gateway's priority scheduler ran (it falls back to FIFO admission with only an error in its log)
    assert "priority scheduler enabled" in (tmp_path / "logs" / "smg+priority" / "gateway.log").read_text()
    for name in ("gie", "dynamo"):  # the peers' routers, by name, on the real controller
        assert f"data-parallel routing with {name} over 2 workers" in (tmp_path / "logs" / f"{name}.log").read_text()
        params = json.loads((tmp_path / "logs" / f"{name}-c4-r1" / "summary.json").read_text())["run"]["params"]
        assert params["router"] == name and params["policy"] == "fcfs"


def test_peers_sim(tmp_path: Path) -> None:
    table = tmp_path / "peers.json"
    out = _run("peers_sim", "--workloads", "judge", "--scenarios", "s1", "--workers", "2", "--duration", "2",
               "--runs-dir", str(tmp_path / "runs"), "--json", str(table))
    assert "judge s1 D=2" in out and "vs gie" in out and "target(s) missed" in out
    cell = json.loads(table.read_text())["tables"]["judge s1 D=2"]
    assert set(cell) == {"d2lpm", "d2lpm-no-isolation", "gie", "dynamo", "preble"}
    assert all(row["throughput"] > 0 for row in cell.values())
    assert cell["d2lpm"]["theorem"]  # ours is audited against Theorem G, the peers against the reference
    assert not cell["gie"]["theorem"]
    assert len(list((tmp_path / "runs").iterdir())) == 5
    # Another seed: other arrivals, every system on the same ones.
    other = tmp_path / "seed1.json"
    _run("peers_sim", "--workloads", "judge", "--scenarios", "s1", "--workers", "2", "--duration", "2",
         "--systems", "d2lpm", "--seed", "1", "--runs-dir", str(tmp_path / "runs1"), "--json", str(other))
    seeded = json.loads(other.read_text())["tables"]["judge s1 D=2"]["d2lpm"]
    assert seeded["requests"] > 0 and seeded["throughput"] != cell["d2lpm"]["throughput"]
    summary = json.loads(next((tmp_path / "runs1").iterdir()).joinpath("summary.json").read_text())
    assert summary["run"]["seed"] == 1


def test_open_flood_sim(tmp_path: Path) -> None:
    out = _run("open_flood_sim", "--workloads", "judge", "--workers", "2", "--duration", "2", "--systems", "d2lpm",
               "preble", "--json", str(tmp_path / "out.json"))
    table = json.loads((tmp_path / "out.json").read_text())["tables"]["judge"]
    assert list(table) == ["d2lpm", "preble"]
    # a light program is never faster beside a flood than alone on the same cluster
    assert all(row["light_p50_slowdown"] >= 1.0 and row["light_programs"] > 0 for row in table.values())
    # a decoded token waits for a longer step in the flood's batches than in the light traffic's own
    assert all(row["decode_step_ms"] > row["decode_step_ms_alone"] > 0 for row in table.values())
    assert "d2lpm throughput / preble's" in out
    # how each run ended: service/s divides by its end, after the last admission's requests drain
    for name, row in table.items():
        d = row["drain"]
        assert d["last_admission_s"] < d["end_s"] and d["first_worker_done_s"] <= d["end_s"]
        assert 1 <= d["running_max"] <= d["running"] and d["recomputed_tokens"] >= 0
        assert f"{name}: ends at {d['end_s']:.1f} s" in out
        # what the placement cost: prompt tokens computed, programs split over workers, idle workers
        pl = row["placement"]
        assert 0 < pl["computed_prompt_tokens"] and 0 <= pl["programs_on_several_workers"] <= pl["multi_call_programs"]
        assert 0 <= pl["worker_idle_s"] < d["end_s"]
        assert f"{name}: computed {pl['computed_prompt_tokens']:,} prompt tokens" in out


def test_open_flood_sim_says_where_the_wronged_tenants_slowest_calls_spent_their_time(tmp_path: Path) -> None:
    out = _run("open_flood_sim", "--workloads", "cached-prefix", "--workers", "2", "--duration", "6", "--systems",
               "d2lpm", "--json", str(tmp_path / "out.json"))
    row = json.loads((tmp_path / "out.json").read_text())["tables"]["cached-prefix"]["d2lpm"]
    tail = row["wronged_tail"]
    assert 0 <= tail["sent_s"] <= 6.0  # sent during the arrivals
    assert min(tail["admission_s"], tail["first_token_s"]) >= 0 and tail["decode_s"] > 0
    # the slowest 2% are the tail its P99 measures
    assert tail["admission_s"] + tail["first_token_s"] + tail["decode_s"] >= 0.5 * row["wronged_p99_s"]
    assert "d2lpm: the wronged tenant's slowest 2% of calls, sent" in out
    # the calls sent in the last second, after the batches filled
    assert 0 < row["wronged_p99_after_fill_s"] and "the P99 of its calls sent after the first 5 s" in out


def test_open_flood_sim_with_mixed_chunks(tmp_path: Path) -> None:
    out = _run("open_flood_sim", "--workloads", "qa", "--workers", "2", "--duration", "2", "--systems", "d2lpm",
               "--enable-mixed-chunk", "--chunked-prefill-size", "1024", "--json", str(tmp_path / "out.json"))
    assert "chunked prefill 1024, mixed chunk" in out
    data = json.loads((tmp_path / "out.json").read_text())
    assert data["args"]["enable_mixed_chunk"] is True and data["tables"]["qa"]["d2lpm"]["light_programs"] > 0
    bad = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "experiments" / "open_flood_sim.py"),
                          "--chunked-prefill-size", "0"], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "--chunked-prefill-size must be a positive number of tokens" in bad.stderr


def test_open_flood_sim_sets_options_of_our_router(tmp_path: Path) -> None:
    args = ["--workloads", "qa", "--workers", "2", "--duration", "2", "--systems", "d2lpm"]
    runs = {}
    for option in ("null", "1024"):
        out = _run("open_flood_sim", *args, "--router-option", f"worker_chunk_tokens={option}",
                   "--json", str(tmp_path / f"{option}.json"))
        assert f"router worker_chunk_tokens={option}" in out
        runs[option] = json.loads((tmp_path / f"{option}.json").read_text())["tables"]["qa"]["d2lpm"]
    # QA's documents are several chunks of 1,024: the rule moves requests, so the runs differ.
    assert runs["null"] != runs["1024"]
    for bad_option, message in (("worker_chunk_tokens", "KEY=JSON"), ("worker_chunk_tokens=0", "worker_chunk_tokens"),
                                ("no_such_option=1", "no_such_option")):
        bad = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "experiments" / "open_flood_sim.py"),
                              "--router-option", bad_option], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                             capture_output=True, text=True, timeout=120)
        assert bad.returncode != 0 and message in bad.stderr, bad.stderr


def test_open_flood_sim_measures_latency_lanes_beside_the_others(tmp_path: Path) -> None:
    out = _run("open_flood_sim", "--workloads", "judge", "--workers", "3", "--duration", "2", "--systems",
               "d2lpm", "preble", "--lanes", "1x8192", "--json", str(tmp_path / "out.json"),
               "--plot", str(tmp_path / "lanes.png"))
    table = json.loads((tmp_path / "out.json").read_text())["tables"]["judge"]
    assert list(table) == ["d2lpm", "preble", "d2lpm+lanes 1x8192"]
    # the lane changes placements: the run differs from the one without it
    assert table["d2lpm+lanes 1x8192"] != table["d2lpm"]
    assert "d2lpm+lanes 1x8192 throughput / preble's" in out
    assert (tmp_path / "lanes.png").stat().st_size > 10_000
    for args, message in ((["--lanes", "two"], "K or KxTOKENS"), (["--lanes", "3"], "at least one other worker"),
                          (["--lanes", "1x0"], "lane_tokens"), (["--systems", "d2lpm", "--plot", "x.png"], "needs preble")):
        bad = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "experiments" / "open_flood_sim.py"),
                              "--workers", "3", *args], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                             capture_output=True, text=True, timeout=120)
        assert bad.returncode != 0 and message in bad.stderr, bad.stderr


def test_open_flood_sim_plot_tells_a_lane_sweep_apart() -> None:
    path = ROOT / "benchmarks" / "experiments" / "open_flood_sim.py"
    spec = importlib.util.spec_from_file_location("open_flood_sim", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    # thirteen systems: the three baselines and ten lane settings, as in a sweep; no two share a colour
    colors = [module.system_color(i) for i in range(13)]
    assert len(set(colors)) == 13


def test_open_flood_sim_reads_the_paper_grid() -> None:
    out = _run("open_flood_sim", "--grid", str(ROOT / "docs" / "sim-trends" / "grid.json"))
    cells = [line.split()[:3] for line in out.splitlines()[1:]]
    assert ["judge", "S2", "D=8"] in cells and len(cells) == 18
