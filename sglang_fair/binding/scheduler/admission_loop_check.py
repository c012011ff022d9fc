"""At start: does SGLang's admission function still have the shape the admission gate relies on?

``admission_gate.py`` arms the waiting queue when the fair adder is built and
expects the next iteration of the queue to be the admission loop. So
``Scheduler._get_new_batch_prefill_raw``'s source must still build the adder
once, then loop over ``self.waiting_queue``, and between the two touch the
queue only through calls known not to consume the armed iteration. A
scheduler running a fair policy refuses to start otherwise.
"""

from __future__ import annotations

import ast
import functools
import inspect
import textwrap

from sglang_fair.binding.common.version import installed_sglang, release_before

_HOOK = "gate_prefill_admission (AROUND Scheduler._get_new_batch_prefill_raw)"
# Calls that may take the waiting queue between building the adder and the loop.
# The LoRA drainer iterates it, so it gets a plain copy (``plain_queue_for_lora_drainer``);
# the policy's chunk limit only iterates under shortest-prefill-first, which no gated policy uses.
_QUEUE_READERS = {"len", "shortest_prefill_chunk_limit", "update_draining_state"}


class AdmissionBypassed(RuntimeError):
    """SGLang admitted without walking the fair policy's candidates."""


def bypass_message(what: str) -> str:
    return (f"sglang-fair: SGLang {installed_sglang()}'s admission loop {what}; the fair policy cannot gate "
            f"admission through {_HOOK}, so the scheduler stops rather than run unfair")


@functools.cache
def check_admission_loop() -> None:
    """Refuse to start if ``_get_new_batch_prefill_raw`` no longer has the shape the gate needs."""
    from sglang.srt.managers.scheduler import Scheduler

    problems = admission_loop_problems(Scheduler._get_new_batch_prefill_raw)
    if problems:
        raise AdmissionBypassed(
            f"sglang-fair cannot gate admission on SGLang {installed_sglang()} through {_HOOK}: "
            + "; ".join(problems) + ". Install a supported SGLang release (sglang_fair/binding/common/version.py).")


def admission_loop_problems(function, release: str | None = None) -> list[str]:
    """What in ``function`` (SGLang's admission function, hooks unwrapped) breaks the gate's assumptions,
    on the installed SGLang (or ``release``): it decides how the adder may be built."""
    named = release_before("0.5.22", release)  # the hook table replaces the class name PrefillAdder there
    function = inspect.unwrap(function)
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    ast.increment_lineno(tree, function.__code__.co_firstlineno - 1)  # lines as in SGLang's file
    body = tree.body[0].body
    builds = [i for i, stmt in enumerate(body) if _builds_adder(stmt, named)]
    if len(builds) != 1:
        form = "PrefillAdder(...)" if named else "self.get_prefill_adder_class()(...)"
        return [f"expected one `adder = {form}` statement, found {len(builds)}"]
    start = builds[0] + 1
    loops = [i for i in range(start, len(body)) if isinstance(body[i], ast.For) and _is_queue(body[i].iter)]
    if not loops:
        return ["no `for req in self.waiting_queue` loop follows the adder"]
    problems = []
    between = body[start:loops[0]]
    for stmt in between:
        for node in ast.walk(stmt):
            if isinstance(node, (ast.Return, ast.For, ast.comprehension)) and not _is_plain_loop(node):
                line = (node.iter if isinstance(node, ast.comprehension) else node).lineno
                problems.append(f"line {line} may leave or iterate before the admission loop")
    readers = {id(arg) for stmt in between for node in ast.walk(stmt) if isinstance(node, ast.Call)
               and _call_name(node) in _QUEUE_READERS for arg in node.args}
    for stmt in between:
        for node in ast.walk(stmt):
            if _is_queue(node) and id(node) not in readers:
                problems.append(f"line {node.lineno} uses self.waiting_queue before the admission loop")
    loop = body[loops[0]]
    if not any(isinstance(node, ast.Call) and _call_name(node) == "add_one_req" for node in ast.walk(loop)):
        problems.append("the admission loop no longer calls adder.add_one_req")
    return problems


def _builds_adder(stmt: ast.stmt, named: bool) -> bool:
    """``adder = self.get_prefill_adder_class()(...)``, or where ``named`` ``adder = PrefillAdder(...)``."""
    if not (isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call)):
        return False
    func = stmt.value.func
    if named:
        return isinstance(func, ast.Name) and func.id == "PrefillAdder"
    return isinstance(func, ast.Call) and _call_name(func) == "get_prefill_adder_class"


def _is_queue(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "waiting_queue"
            and isinstance(node.value, ast.Name) and node.value.id == "self")


def _is_plain_loop(node: ast.AST) -> bool:
    """A loop or comprehension that does not touch the waiting queue (e.g. over running requests)."""
    if isinstance(node, ast.Return):
        return False
    return not any(_is_queue(child) for child in ast.walk(node.iter))


def _call_name(call: ast.Call) -> str | None:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
