"""The built wheel works on its own: package data included, run from outside the repository."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def installed_wheel(tmp_path_factory) -> Path:
    """The project built as a wheel (no network: the build tools of this environment) and
    installed into an empty directory, which is then put first on the import path."""
    tmp = tmp_path_factory.mktemp("wheel")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    subprocess.run([*pip, "wheel", "--no-build-isolation", "--no-deps", "-q", str(REPO), "-w", str(tmp / "dist")],
                   check=True, capture_output=True, text=True)
    wheels = list((tmp / "dist").glob("sglang_fair-*.whl"))
    assert len(wheels) == 1, wheels
    subprocess.run([*pip, "install", "--no-deps", "-q", "--target", str(tmp / "site"), str(wheels[0])],
                   check=True, capture_output=True, text=True)
    return tmp


def _run(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(tmp / "site")}
    return subprocess.run([sys.executable, *args], cwd=tmp, env=env, capture_output=True, text=True, timeout=600)


def test_the_wheel_is_what_gets_imported(installed_wheel):
    out = _run(installed_wheel, "-c", "import sglang_fair; print(sglang_fair.__file__)")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().startswith(str(installed_wheel / "site")), out.stdout


def test_a_simulator_bench_runs_from_the_wheel_with_its_scenarios(installed_wheel):
    out = _run(installed_wheel, "-m", "sglang_fair.bench", "run", "--workload", "tot", "--scenario", "s1",
               "--policy", "dlpm", "--backend", "sim", "--num-programs", "1", "--out", "run", "--no-progress")
    assert out.returncode == 0, out.stdout + out.stderr
    assert (installed_wheel / "run" / "summary.json").is_file()


@pytest.mark.engine
def test_launcher_help_from_the_wheel_lists_ours_and_sglangs_options(installed_wheel):
    out = _run(installed_wheel, "-m", "sglang_fair.launch_server", "--help")
    assert out.returncode == 0, out.stderr
    for option in ("--policy", "--tiny-cpu", "--schedule-policy", "--fair-quantum", "--model-path"):
        assert option in out.stdout, option
