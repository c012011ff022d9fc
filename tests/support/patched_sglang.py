"""A copy of the installed SGLang with patches/ applied, for tests that run the patched build."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

PATCHES = sorted((Path(__file__).resolve().parents[2] / "patches").glob("0*.patch"))


def build_patched_tree(root: Path) -> Path:
    """``root``/sglang: the pinned release's source with every patch applied (each must apply cleanly)."""
    sglang = pytest.importorskip("sglang")
    assert sglang.__version__ == "0.5.23"
    shutil.copytree(Path(sglang.__file__).parent, root / "sglang", ignore=shutil.ignore_patterns("__pycache__"))
    for patch in PATCHES:
        check = subprocess.run(["git", "apply", "--check", "-p1", str(patch)], cwd=root, capture_output=True, text=True)
        assert check.returncode == 0, f"{patch.name} does not apply: {check.stderr}"
        subprocess.run(["git", "apply", "-p1", str(patch)], cwd=root, check=True)
    return root


def patched_env(tree: Path) -> dict[str, str]:
    """Environment for a process that must import the patched SGLang in ``tree``."""
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(tree), os.environ.get("PYTHONPATH")]))}
