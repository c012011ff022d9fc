"""Every SGLang internal the binding touches is named in ``common/sglang_private.py`` and reached through it.

The scan reads the binding's sources: an access to a private attribute
(``x._name``, or ``getattr(x, "_name")``) is ours only on ``self``/``cls``
of a class that defines the name itself; any other is SGLang's (or the
standard library's, ``NOT_SGLANG``).
"""

from __future__ import annotations

import ast
from pathlib import Path

from sglang_fair.binding.common.sglang_private import INVENTORY, NOT_SGLANG, WRITTEN

REPO = Path(__file__).resolve().parents[3]
BINDING = REPO / "sglang_fair" / "binding"
INVENTORY_MODULE = BINDING / "common" / "sglang_private.py"
DOCS = REPO / "docs"
_NAME_CALLS = {"getattr", "setattr", "hasattr", "delattr"}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _own_names(cls: ast.ClassDef) -> set[str]:
    """The names a class defines: its methods and class attributes, ``__slots__``, and ``self.x = ...``."""
    names: set[str] = set()
    for node in ast.walk(cls):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node is not cls:
            names.add(node.name)
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        for target in targets:
            for sub in ast.walk(target):
                if isinstance(sub, ast.Name):
                    names.add(sub.id)
                elif isinstance(sub, ast.Attribute) and ast.unparse(sub.value) in {"self", "cls"}:
                    names.add(sub.attr)
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets):
            names.update(c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant))
    return names


def private_accesses(source: str) -> list[tuple[int, str, str]]:
    """(line, receiver, name) of each private attribute access in ``source`` that is not a class's own."""
    found: list[tuple[int, str, str]] = []

    def visit(node: ast.AST, own: set[str]) -> None:
        if isinstance(node, ast.ClassDef):
            own = _own_names(node)
        elif isinstance(node, ast.Attribute) and _private(node.attr):
            receiver = ast.unparse(node.value)
            if not (receiver in {"self", "cls"} and node.attr in own):
                found.append((node.lineno, receiver, node.attr))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _NAME_CALLS
              and len(node.args) > 1 and isinstance(node.args[1], ast.Constant)
              and isinstance(node.args[1].value, str) and _private(node.args[1].value)):
            receiver, name = ast.unparse(node.args[0]), node.args[1].value
            if not (receiver in {"self", "cls"} and name in own):
                found.append((node.lineno, receiver, name))
        for child in ast.iter_child_nodes(node):
            visit(child, own)

    visit(ast.parse(source), set())
    return found


def written_attributes(source: str) -> list[tuple[int, str, str]]:
    """(line, receiver, name) of each attribute assigned (or assigned into) on other than ``self``/``cls``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
        while targets:
            target = targets.pop()
            if isinstance(target, (ast.Tuple, ast.List)):
                targets.extend(target.elts)
                continue
            while isinstance(target, ast.Subscript):  # x.status[rank] = ... writes into x.status
                target = target.value
            if isinstance(target, ast.Attribute) and ast.unparse(target.value) not in {"self", "cls"}:
                found.append((node.lineno, ast.unparse(target.value), target.attr))
    return found


def _sources() -> list[Path]:
    paths = sorted(BINDING.rglob("*.py"))
    assert INVENTORY_MODULE in paths and len(paths) > 20  # the scan reads the binding, not nothing
    return paths


def test_the_scan_finds_sglang_private_accesses_and_skips_our_own() -> None:
    source = '''
def hook(original, self, scheduler):
    scheduler._add_request_to_queue(None)
    getattr(scheduler, "_secret", None)
    return self._queue

class Ours:
    __slots__ = ("_slot",)
    def __init__(self):
        self._mine = 1
    def _helper(self):
        return self._mine, self._slot, self._helper, self.__class__

class Subclass(Ours):
    def read(self):
        return self._inherited
'''
    assert [(receiver, name) for _, receiver, name in private_accesses(source)] == [
        ("scheduler", "_add_request_to_queue"), ("scheduler", "_secret"), ("self", "_queue"),
        ("self", "_inherited")]


def test_no_module_but_the_inventory_touches_sglang_private_names() -> None:
    allowed = {entry.name for entry in NOT_SGLANG}
    offenders = []
    for path in _sources():
        if path == INVENTORY_MODULE:
            continue
        for line, receiver, name in private_accesses(path.read_text()):
            if name not in allowed:
                offenders.append(f"{path.relative_to(BINDING)}:{line}: {receiver}.{name}")
    assert offenders == [], "reach SGLang's private names through common/sglang_private.py (and list them there)"


def test_the_inventory_lists_every_private_name_it_touches_and_no_other() -> None:
    touched = {name for _, _, name in private_accesses(INVENTORY_MODULE.read_text())}
    listed = {entry.name for entry in INVENTORY}
    assert touched - listed == set(), "touched but not listed in INVENTORY"
    assert listed - touched == set(), "listed in INVENTORY but no accessor touches it"


def test_sglang_internal_state_is_written_only_through_the_inventory() -> None:
    written = {entry.name for entry in WRITTEN}
    offenders = [f"{path.relative_to(BINDING)}:{line}: {receiver}.{name}"
                 for path in _sources() if path != INVENTORY_MODULE
                 for line, receiver, name in written_attributes(path.read_text()) if name in written]
    assert offenders == []
    in_inventory = {name for _, _, name in written_attributes(INVENTORY_MODULE.read_text()) if not _private(name)}
    assert in_inventory - written == set(), "written in the inventory module but not listed in WRITTEN"


def test_every_entry_says_whose_it_is_and_why() -> None:
    for entry in (*INVENTORY, *WRITTEN, *NOT_SGLANG):
        assert entry.name and entry.owner and len(entry.why) > 10, entry


def test_the_architecture_doc_lists_the_inventory() -> None:
    rows = [line for line in (DOCS / "architecture.md").read_text().splitlines() if line.startswith("|")]
    for entry in (*INVENTORY, *WRITTEN):
        assert any(f"`{entry.name}`" in row and entry.owner.rsplit(".", 1)[-1] in row for row in rows), entry
