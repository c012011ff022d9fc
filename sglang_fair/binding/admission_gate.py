"""The admission gate: SGLang's own admission loop walks the fair policy's candidates.

``Scheduler._get_new_batch_prefill_raw`` builds a ``PrefillAdder`` and then
admits with ``for req in self.waiting_queue``. During a gated pass
(``gate_prefill_admission``, AROUND that function) the waiting queue is an
``_AdmissionQueue``; building the fair adder arms it, and its next iteration,
the admission loop that follows the adder, yields the policy's candidates
instead of the raw queue. Everything else in the loop (budgets, chunking,
LoRA, prefetch) stays SGLang's. SGLang 0.5.22 and later build the adder from
``Scheduler.get_prefill_adder_class()``, which the fair policy extends; 0.5.21
names ``PrefillAdder`` itself, so there the fair adder stands in for that class
and takes its policy from the pass in progress (``pass_policy``).

This relies on the shape of one SGLang function, so it is checked twice, and
a mismatch stops the scheduler rather than letting it run unfair:

* at start (``check_admission_loop``, from ``FairSchedulePolicy``): the
  function's source still builds the adder once, then loops over
  ``self.waiting_queue``, and between the two touches the queue only through
  calls known not to consume the armed iteration;
* in every pass: each request the loop hands to ``add_one_req`` must be the
  candidate the policy offered last, and an armed queue must have been walked
  (``AdmissionBypassed`` otherwise).
"""

from __future__ import annotations

import ast
import contextvars
import functools
import inspect
import textwrap

from sglang_fair.binding import isolation
from sglang_fair.binding.schedule_policy import fair_policy
from sglang_fair.binding.version import installed_sglang, release_before

_HOOK = "gate_prefill_admission (AROUND Scheduler._get_new_batch_prefill_raw)"
# Calls that may take the waiting queue between building the adder and the loop.
# The LoRA drainer iterates it, so it gets a plain copy (``plain_queue_for_lora_drainer``);
# the policy's chunk limit only iterates under shortest-prefill-first, which no gated policy uses.
_QUEUE_READERS = {"len", "shortest_prefill_chunk_limit", "update_draining_state"}
# The fair policy of the admission pass in progress (its scheduler's), for adders SGLang builds itself.
_PASS_POLICY: contextvars.ContextVar = contextvars.ContextVar("sglang_fair_pass_policy", default=None)


class AdmissionBypassed(RuntimeError):
    """SGLang admitted without walking the fair policy's candidates."""


class _AdmissionQueue(list):
    """The waiting queue, whose next iteration after arming walks the policy.

    Any other iteration (SGLang's prefix matching, the queue rebuilt after
    admission, aborts) sees the plain list.
    """

    __slots__ = ("armed_by",)

    def __init__(self, items=()) -> None:
        super().__init__(items)
        self.armed_by = None

    def __iter__(self):
        fair = self.armed_by
        if fair is None:
            return list.__iter__(self)
        self.armed_by = None
        return fair.admission_order(self)


def gate_prefill_admission(original, scheduler, *args, **kwargs):
    fair = fair_policy(scheduler)
    if fair is None:
        return original(scheduler, *args, **kwargs)
    fair.reconcile_queue(scheduler.waiting_queue)
    token = _PASS_POLICY.set(fair)
    try:
        if not fair.gated:
            return original(scheduler, *args, **kwargs)
        return _gated_pass(original, fair, scheduler, *args, **kwargs)
    finally:
        _PASS_POLICY.reset(token)


def _gated_pass(original, fair, scheduler, *args, **kwargs):
    queue = scheduler.waiting_queue
    if not isinstance(queue, _AdmissionQueue):
        queue = scheduler.waiting_queue = _AdmissionQueue(queue)
    running_batch = _running_batch(args, kwargs)
    fair.isolating = isolation.starved_clients(fair, running_batch)
    fair.preempting = bool(fair.isolating) and isolation.batch_full(scheduler, running_batch)
    preemption = scheduler.enable_priority_preemption
    if fair.preempting:
        scheduler.enable_priority_preemption = True  # SGLang reopens the full batch and asks the adder to preempt
    fair.admission_queue = queue  # armed by the adder's construction (fair_adder_built)
    try:
        result = original(scheduler, *args, **kwargs)
    finally:
        walked = queue.armed_by is None
        queue.armed_by = None
        fair.admission_queue = None
        fair.isolating, fair.preempting = set(), False
        scheduler.enable_priority_preemption = preemption
    if not walked:
        raise AdmissionBypassed(_bypass_message("built the prefill adder but never iterated the waiting queue"))
    return result


def pass_policy():
    """The fair policy of the admission pass in progress, or None outside one."""
    return _PASS_POLICY.get()


def fair_adder_built(fair) -> None:
    """The pass's adder exists: the admission loop is next, so arm the queue for it."""
    if fair.admission_queue is not None:
        fair.admission_queue.armed_by = fair


def check_offered(fair, req) -> None:
    """In a gated pass, ``req`` must be the candidate the policy offered last."""
    if fair.admission_queue is not None and req is not fair.offered:
        raise AdmissionBypassed(_bypass_message(f"asked to admit {req.rid!r}, which the fair policy did not offer"))


def plain_queue_for_lora_drainer(original, drainer, waiting_queue, *args, **kwargs):
    """AROUND ``LoRADrainer.update_draining_state``: it iterates the queue between the
    adder and the admission loop, so it gets a plain copy and the armed walk stays the loop's."""
    if isinstance(waiting_queue, _AdmissionQueue):
        waiting_queue = waiting_queue[:]  # a slice of a list subclass is a plain list
    return original(drainer, waiting_queue, *args, **kwargs)


def _running_batch(args: tuple, kwargs: dict):
    """``running_batch`` of ``_get_new_batch_prefill_raw(self, prefill_delayer_single_pass, running_batch)``."""
    return kwargs["running_batch"] if "running_batch" in kwargs else args[1] if len(args) > 1 else None


def _bypass_message(what: str) -> str:
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
            + "; ".join(problems) + ". Install a supported SGLang release (sglang_fair/binding/version.py).")


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
