"""Application identity and token profiles."""

from __future__ import annotations

import pytest

from sglang_fair.core.apps import MAX_LEARNED_APPS, ProfileBook, TokenProfile, normalize_app_id


def test_ids_are_bounded_like_client_ids():
    assert normalize_app_id(None) is None
    assert normalize_app_id("  ") is None
    assert normalize_app_id("summarize") == "summarize"
    weird = normalize_app_id("x" * 500)
    assert weird.startswith("~") and len(weird) == 17


def test_configured_stages_learned_and_default():
    book = ProfileBook.from_config(
        {"agent": {"stages": [{"input": 10, "system": 5, "output": 1}, {"input": 20, "output": 2}]}},
        default={"input": 100, "output": 10},
    )
    assert book.expected("agent", 0) == TokenProfile(10, 5, 1)
    assert book.expected("agent", 7) == TokenProfile(20, 0, 2)  # past the end: last stage
    assert book.expected("other", 0) == TokenProfile(100, 0, 10)
    book.observe("other", 1, 40, 0, 4)
    book.observe("other", 1, 60, 0, 6)
    book.observe("agent", 0, 9999, 0, 9999)  # configured apps are not learned
    assert book.expected("other", 3) == TokenProfile(50, 0, 5)  # nearest earlier stage seen
    assert book.expected("other", 0) == TokenProfile(100, 0, 10)
    assert book.expected("agent", 0) == TokenProfile(10, 5, 1)
    assert TokenProfile(10, 5, 1).weighted(1, 2, 1) == 21


def test_learned_apps_are_bounded():
    book = ProfileBook()
    for i in range(MAX_LEARNED_APPS + 10):
        book.observe(f"app{i}", 0, 10, 0, 1)
    assert book.expected(f"app{MAX_LEARNED_APPS + 5}", 0) == book.default
    assert book.expected("app0", 0) == TokenProfile(10, 0, 1)


@pytest.mark.parametrize(
    "apps, needle",
    [
        ({"a": {"stages": [{"input": 0}]}}, "at least one token"),
        ({"a": {"stages": [{"inptu": 5}]}}, "unknown keys"),
        ({"a": {"stages": "x"}}, "stages"),
        ({"a": {"stages": [{"input": "many"}]}}, "apps.a.stages"),
    ],
)
def test_bad_profiles_are_refused(apps, needle):
    with pytest.raises(ValueError, match=needle):
        ProfileBook.from_config(apps)
