"""Placements: a late-binding router's per-worker view, from the workers' reports."""

from __future__ import annotations

from sglang_fair.router.placed import Placements


def test_waiting_prefill_and_kv_follow_the_reports() -> None:
    p = Placements(2)
    p.placed("a", 1, prompt=100, uncached=60)
    assert (p.waiting, p.prefill_tokens, p.kv_tokens) == ([0, 1], [0, 60], [0, 0])
    assert p.admitted("a", cached_tokens=70)  # the worker found more cached than the index believed
    assert not p.admitted("a")  # a re-admission after a retraction changes nothing
    assert (p.waiting, p.prefill_tokens, p.kv_tokens) == ([0, 0], [0, 30], [0, 30])  # the cached 70 are shared
    assert p.progress("a", 1)  # the first token ends the prefill
    assert not p.progress("a", 5)
    assert (p.prefill_tokens, p.kv_tokens) == ([0, 0], [0, 35])
    p.finished("a")
    p.finished("a")  # twice: ignored
    assert (p.waiting, p.prefill_tokens, p.kv_tokens) == ([0, 0], [0, 0], [0, 0])


def test_progress_before_the_admission_report_and_a_dead_worker() -> None:
    p = Placements(1)
    p.placed("a", 0, prompt=10, uncached=10)
    p.placed("b", 0, prompt=20, uncached=20)
    assert p.progress("a", 2)  # its admission report was overtaken
    assert (p.waiting, p.prefill_tokens, p.kv_tokens) == ([1], [20], [12])
    p.finished("b")  # finished (aborted) before admission
    assert (p.waiting, p.prefill_tokens) == ([0], [0])
    p.drop_worker(0)
    p.finished("a")
    assert (p.waiting, p.prefill_tokens, p.kv_tokens) == ([0], [0], [0])
