"""Our state on an SGLang object is one attribute holding one typed object."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

from sglang_fair.binding.common.attached_state import ATTRIBUTE, attach, attached, attached_or_new


@dataclass
class Marks:
    seen: int = 0


def test_one_attribute_holds_one_typed_object():
    req = SimpleNamespace(rid="r")
    assert attached(req, Marks) is None
    marks = attached_or_new(req, Marks)
    marks.seen += 1
    assert attached_or_new(req, Marks) is marks and attached(req, Marks).seen == 1
    assert set(vars(req)) == {"rid", ATTRIBUTE}


def test_an_object_of_another_kind_is_not_taken_for_ours():
    controller = SimpleNamespace()
    attach(controller, "something else")
    assert attached(controller, Marks) is None
