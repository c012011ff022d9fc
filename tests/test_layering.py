"""Import contracts (pyproject.toml, ``[tool.importlinter]``): the layers, one binding package per
process, no SGLang in the engine-agnostic code, no import cycles anywhere. Imports inside functions and under TYPE_CHECKING count."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONTRACTS = ("layers", "binding-by-process", "engine-agnostic", "no-cycles")


def test_every_import_contract_is_kept():
    pytest.importorskip("importlinter")
    probe = ("import sys; from importlinter.cli import lint_imports; "
             "sys.exit(lint_imports(no_cache=True, no_logo=True, verbose=False))")
    run = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.count(" KEPT") == len(CONTRACTS), run.stdout


def test_the_contracts_cover_each_layer_and_each_process_package():
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    contracts = {contract["id"]: contract for contract in config["contracts"]}
    assert tuple(contracts) == CONTRACTS
    processes = {name.strip() for layer in contracts["binding-by-process"]["layers"] for name in layer.split("|")}
    packages = {f"sglang_fair.binding.{path.name}" for path in (ROOT / "sglang_fair" / "binding").iterdir()
                if (path / "__init__.py").exists()}
    assert packages <= processes  # every binding package has its place, none escapes the contract
    layered = {name.strip(" :") for layer in contracts["layers"]["layers"] for name in layer.replace(":", "|").split("|")}
    top = {f"sglang_fair.{path.stem}" for path in (ROOT / "sglang_fair").iterdir()
           if (path / "__init__.py").exists() or (path.suffix == ".py" and path.stem != "__init__")}
    assert top - {"sglang_fair.configs"} <= {name.strip() for name in layered}


def test_imports_for_type_checking_count():
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    assert config.get("exclude_type_checking_imports", False) is False
