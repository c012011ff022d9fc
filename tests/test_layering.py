"""Import layering: no cycles between the options and the policies, and the simulator and the
metrics stand without the bench harness."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "sglang_fair"


def _runtime_imports(path: Path) -> set[str]:
    """Modules ``path`` imports at run time (``if TYPE_CHECKING:`` blocks and function bodies excluded)."""
    tree = ast.parse(path.read_text())
    found = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_policies_do_not_import_the_options_that_validate_policy_names():
    modules = [*sorted((PACKAGE / "core" / "policies").glob("*.py")), PACKAGE / "core" / "policy_config.py"]
    offenders = {path.name for path in modules if "sglang_fair.core.options" in _runtime_imports(path)}
    assert not offenders


def test_the_simulator_and_the_metrics_do_not_import_the_bench():
    probe = ("import sys, sglang_fair.sim.backend, sglang_fair.metrics.summary; "
             "print([m for m in sys.modules if m.startswith('sglang_fair.bench')])")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
