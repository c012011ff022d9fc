"""A copy of the installed SGLang with its release's patch series (patches/<release>/) applied,
for tests that run the patched build."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

PATCHES_DIR = Path(__file__).resolve().parents[2] / "patches"


def patch_series(release: str) -> list[Path]:
    """The series cut against SGLang ``release``, in order."""
    return sorted((PATCHES_DIR / release).glob("0*.patch"))


def build_patched_tree(root: Path) -> Path:
    """``root``/sglang: the installed release's source with its series applied (each patch must apply cleanly)."""
    sglang = pytest.importorskip("sglang")
    series = patch_series(sglang.__version__)
    assert series, f"patches/ has no series for the installed SGLang {sglang.__version__}"
    shutil.copytree(Path(sglang.__file__).parent, root / "sglang", ignore=shutil.ignore_patterns("__pycache__"))
    for patch in series:
        check = subprocess.run(["git", "apply", "--check", "-p1", str(patch)], cwd=root, capture_output=True, text=True)
        assert check.returncode == 0, f"{patch.name} does not apply: {check.stderr}"
        subprocess.run(["git", "apply", "-p1", str(patch)], cwd=root, check=True)
    return root


def patched_env(tree: Path) -> dict[str, str]:
    """Environment for a process that must import the patched SGLang in ``tree``."""
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(tree), os.environ.get("PYTHONPATH")]))}
