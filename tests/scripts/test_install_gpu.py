"""scripts/install_gpu.sh refuses what would break a GPU install, before installing anything.

(The install itself needs a GPU machine and SGLang's CUDA wheels; what runs
here are its checks, which stop it with a message naming the problem.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "install_gpu.sh"


def _run(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    # PIP_NO_INDEX: should a check ever let the script through, pip can download nothing.
    return subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PIP_NO_INDEX": "1", **env}, cwd=tmp_path)


def test_an_old_python_is_refused_naming_the_version(tmp_path: Path) -> None:
    old = tmp_path / "python3.10"
    old.write_text("#!/bin/sh\ncase \"$*\" in *-V*) echo 'Python 3.10.12' ;; *) exit 1 ;; esac\n")
    old.chmod(0o755)
    done = _run(tmp_path, PYTHON=str(old), VENV=str(tmp_path / "venv"))
    assert done.returncode != 0
    assert "Python 3.10.12" in done.stderr and "needs Python >= 3.11" in done.stderr
    assert not (tmp_path / "venv").exists()


def test_a_venv_with_the_cpu_stand_ins_is_refused(tmp_path: Path) -> None:
    # The test environment itself was made by scripts/install_cpu.sh, stand-ins included.
    venv = Path(sys.executable).parents[1]
    done = _run(tmp_path, VENV=str(venv))
    assert done.returncode != 0 and "CPU stand-ins" in done.stderr, done.stderr


def test_the_install_check_fails_on_this_cpu_machine_naming_each_problem() -> None:
    """The check install_gpu.sh ends with, run where there is no GPU: it must fail, not say ok."""
    done = subprocess.run([sys.executable, "-m", "sglang_fair.install_check"], capture_output=True, text=True,
                          timeout=300, cwd=REPO)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "is a CPU build" in done.stderr and "sgl_kernel is sglang-fair's CPU stand-in" in done.stderr
    assert "ok: sglang 0.5." in done.stdout


def test_a_driver_older_than_torchs_cuda_build_is_named() -> None:
    from sglang_fair.install_check import driver_cuda_release, driver_problem

    smi = "| NVIDIA-SMI 550.54.15   Driver Version: 550.54.15   CUDA Version: 12.4     |"
    assert driver_cuda_release(smi) == "12.4"
    problem = driver_problem("12.8", driver_cuda_release(smi))
    assert problem and "supports CUDA up to 12.4" in problem and "built for CUDA 12.8" in problem
    assert driver_problem("12.4", "12.4") is None and driver_problem("11.8", "12.4") is None
    assert driver_problem("12.10", "12.9") is not None  # releases compare as numbers, not text
    assert driver_problem(None, "12.4") is None and driver_problem("12.8", None) is None
