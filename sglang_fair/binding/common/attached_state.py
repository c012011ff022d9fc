"""Our state on SGLang's objects: at most one attribute per object, each holding one typed object of ours.

* ``Scheduler.policy``, SGLang's own attribute, holds our ``FairSchedulePolicy``
  (the class that replaces ``SchedulePolicy``); everything a scheduler of ours
  keeps hangs off it.
* ``Req`` and ``DataParallelController`` carry ``ATTRIBUTE``: a request what
  its worker has told the router of it (``router_reports.ReportedToRouter``),
  the controller its ``RouterBinding`` (``controller/controller_binding.py``).
"""

from __future__ import annotations

from typing import TypeVar

ATTRIBUTE = "_sglang_fair"

T = TypeVar("T")


def attached(obj: object, kind: type[T]) -> T | None:
    """The ``kind`` object attached to ``obj``, or None."""
    state = getattr(obj, ATTRIBUTE, None)
    return state if isinstance(state, kind) else None


def attach(obj: object, state: object) -> None:
    setattr(obj, ATTRIBUTE, state)


def attached_or_new(obj: object, kind: type[T]) -> T:
    """The ``kind`` object attached to ``obj``, a new ``kind()`` attached first when missing."""
    state = attached(obj, kind)
    if state is None:
        state = kind()
        attach(obj, state)
    return state
