"""The built wheel serves: installed into a fresh environment, ``--tiny-cpu`` starts and answers.

The fresh environment gets the wheel and, for the third-party packages, this
environment's installed ones minus everything of sglang-fair's (its editable
install, the stand-ins' ``.pth``, ``sgl_kernel`` and ``torchvision``): so the
server runs the wheel's code, and the CPU stand-ins it needs come from the
wheel, brought in by the launcher.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from sglang_fair.testing.server import LocalServer

pytestmark = pytest.mark.server

ROOT = Path(__file__).resolve().parents[1]
OURS = ("sglang_fair", "__editable__", "sgl_kernel", "torchvision")


def _build_wheel(tmp: Path) -> Path:
    source = tmp / "source"  # a copy, so building leaves no build/ or egg-info in the checkout
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for name in ("sglang_fair", "docs"):
        shutil.copytree(ROOT / name, source / name, ignore=ignore)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(tmp / "dist"), str(source)], check=True)
    return next((tmp / "dist").glob("sglang_fair-*.whl"))


def _fresh_venv(tmp: Path) -> Path:
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    others = tmp / "third-party"
    others.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.startswith(OURS):
            (others / entry.name).symlink_to(entry)
    fresh_site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                check=True, capture_output=True, text=True).stdout.strip()
    # addsitedir also runs the third-party .pth files (namespace packages), unlike a plain path line.
    Path(fresh_site, "third_party.pth").write_text(f"import site; site.addsitedir({str(others)!r})\n")
    return python


def test_the_built_wheel_serves_tiny_cpu_in_a_fresh_environment(tmp_path):
    wheel = _build_wheel(tmp_path)
    python = _fresh_venv(tmp_path)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True)
    env = {"PYTHONPATH": ""}  # nothing of the checkout
    where = subprocess.run([str(python), "-c", "import sglang_fair, sys; print(sglang_fair.__file__); print(sys.prefix)"],
                           cwd=tmp_path, env={**os.environ, **env}, check=True, capture_output=True, text=True)
    package_file, prefix = where.stdout.split()
    assert package_file.startswith(str(tmp_path / "venv"))

    help_text = subprocess.run([str(python), "-m", "sglang_fair.launch_server", "--help"], cwd=tmp_path,
                               env={**os.environ, **env}, capture_output=True, text=True).stdout
    docs = Path(prefix) / "share" / "doc" / "sglang-fair"
    assert f"The docs/ pages named below are in {docs}." in help_text
    assert (docs / "configuration.md").is_file() and (docs / "fairness.md").is_file()

    with LocalServer(python=str(python), module="sglang_fair.launch_server", extra_args=["--tiny-cpu"],
                     cwd=tmp_path, env=env, skip_tokenizer_init=True) as server:
        body = {"input_ids": [5, 6, 7, 8], "sampling_params": {"max_new_tokens": 3, "ignore_eos": True}}
        assert len(server.post_json("/generate", body)["output_ids"]) == 3
        log = server.log_tail(lines=400)
    standins = Path(package_file).parent / "cpu_standins" / "site"
    assert f"sgl_kernel, torchvision not installed; using sglang-fair's CPU stand-ins ({standins})" in log
