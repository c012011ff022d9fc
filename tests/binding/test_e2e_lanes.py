"""End to end: latency lanes of ``d2lpm_global`` in the real CPU server at --dp 2.

``--fair-router-options '{"lane_workers": 1, "lane_tokens": ...}'`` makes worker 1
a lane. A light client runs a chain of calls; a flood of unrelated prompts
arrives once it has started, so the flood is over its share from its first
request: the lane takes it only while everything there holds under the
budget, and the light client's calls go to the lane. Every request is answered
in full and the run is within Theorem G (``bench audit``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.server

from sglang_fair import cpu_standins  # noqa: E402
from sglang_fair.bench.backends import make_backend  # noqa: E402
from sglang_fair.bench.output import write_run  # noqa: E402
from sglang_fair.metrics.service import ServiceWeights  # noqa: E402
from sglang_fair.testing.server import LocalServer  # noqa: E402
from sglang_fair.workloads.model import Call, Program, Workload  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
LANE = 1
PROMPT, MAX_NEW = 48, 32
LANE_TOKENS = 3 * (PROMPT + MAX_NEW)  # room for three requests at a time
# The flood arrives once the light chain has started (a light call alone takes ~60 ms here), and the
# chain outlasts it: at 1 s a fast machine had run the whole chain before the flood came.
FLOOD_PROGRAMS, FLOOD_START_S, LIGHT_CALLS = 40, 0.2, 16
ROUTER_OPTIONS = {"lane_workers": 1, "lane_tokens": LANE_TOKENS}


def _workload() -> Workload:
    def prompt(seed: int) -> tuple[int, ...]:
        return tuple((seed * 131 + 17 * i) % 1000 + 1 for i in range(PROMPT))

    flood = [Program(f"flood-{p}", "flood", FLOOD_START_S, (Call(tokens=prompt(p), max_new_tokens=MAX_NEW),))
             for p in range(FLOOD_PROGRAMS)]
    light = Program("light-0", "light", 0.0, tuple(
        Call(tokens=prompt(500 + c), max_new_tokens=MAX_NEW, parents=(c - 1,) if c else ())
        for c in range(LIGHT_CALLS)))
    return Workload("flood-and-light", [*flood, light], seed=0, meta={"vocab_size": 1024})


@pytest.fixture(scope="module")
def server():
    args = ["--policy", "dlpm", "--dp", "2", "--enable-metrics", "--max-running-requests", "16",
            "--fair-router-options", json.dumps(ROUTER_OPTIONS)]
    env = {"PYTHONPATH": os.pathsep.join(p for p in [str(cpu_standins.SITE), os.environ.get("PYTHONPATH", "")] if p)}
    with LocalServer(module="sglang_fair.launch_server", extra_args=args, skip_tokenizer_init=True, env=env) as s:
        yield s


def test_the_lane_keeps_the_flood_to_its_budget_and_serves_the_light_client(server: LocalServer,
                                                                           tmp_path: Path) -> None:
    backend = make_backend(server.base_url, policy="dlpm", timeout_s=180.0)
    workload = _workload()
    result = backend.run(workload, progress=False)
    run_dir = tmp_path / "run"
    write_run(run_dir, result, {"workload": workload.name, "policy": "dlpm"}, {"flood": False, "light": True},
              ServiceWeights(1.0, 2.0, "extend"))

    assert not result.partial, result.errors[:3] or [r.error for r in result.records if not r.ok][:3]
    assert all(r.output_tokens == MAX_NEW and r.t_admitted is not None for r in result.records)
    flood = [r for r in result.records if r.client == "flood"]
    light = [r for r in result.records if r.client == "light"]
    assert len(flood) == FLOOD_PROGRAMS and len(light) == LIGHT_CALLS
    assert result.params["router_options"]["lane_workers"] == 1
    # The light client's calls sent while most of the flood was unfinished (it then holds far
    # more on worker 0 than a lane allows) ran on the lane: beside the flood it is under its share.
    flood_start, flood_half = min(r.t_sent for r in flood), sorted(r.t_done for r in flood)[len(flood) // 2]
    beside_flood = [r for r in light if flood_start < r.t_sent < flood_half]
    assert beside_flood and all(r.worker == LANE for r in beside_flood), [(r.t_sent, r.worker) for r in light]
    # While the light client was there, the lane took the flood's requests two or three at a time
    # (what its budget leaves beside the light call), the
    # other worker sixteen (--max-running-requests): without the lane they would split evenly.
    assert sum(r.worker == LANE for r in flood) <= len(flood) / 3, [r.worker for r in flood]

    audit = subprocess.run([sys.executable, "-m", "sglang_fair.bench", "audit", str(run_dir)], cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert "d2lpm_global Theorem G" in audit.stdout and "within bound" in audit.stdout
