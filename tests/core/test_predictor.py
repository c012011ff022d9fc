"""Justitia's demand predictor: beats the per-type mean on held-out history; falls back cleanly."""

from __future__ import annotations

import math
import random

import pytest

from sglang_fair.core.predictor import DemandPredictor

sklearn = pytest.importorskip("sklearn")

VOCAB = 1024
HARD = 7  # a "this question is hard" token id


def synthetic_run(rng: random.Random, app: str) -> tuple[list[int], float]:
    """A run whose cost depends on its first prompt: length, and a difficulty
    token that makes self-consistency-like runs explore more paths."""
    base = {"sc": 4000.0, "fv": 900.0, "mrs": 60000.0}[app]
    length = rng.randint(20, 400)
    prompt = [rng.randrange(8, VOCAB) for _ in range(length)]
    hard = rng.random() < 0.4
    if hard:
        for _ in range(3):
            prompt[rng.randrange(length)] = HARD
    cost = base * (length / 100.0) * (4.0 if hard else 1.0) * math.exp(rng.gauss(0.0, 0.15))
    return prompt, cost


def history(seed: int, per_type: int) -> list[tuple[str, list[int], float]]:
    rng = random.Random(seed)
    return [(app, *synthetic_run(rng, app)) for app in ("sc", "fv", "mrs") for _ in range(per_type)]


def mean_relative_error(pairs) -> float:
    return sum(abs(p - y) / y for p, y in pairs) / len(pairs)


def test_model_beats_per_type_mean_on_held_out_history():
    train, test = history(1, 150), history(2, 60)
    model, means = DemandPredictor(seed=0), DemandPredictor()
    for app, prompt, cost in train:
        model.observe(app, prompt, cost)
        means.observe(app, prompt, cost)
    assert model.fit() == {"sc": 150, "fv": 150, "mrs": 150}
    model_err = mean_relative_error([(model.predict(a, p), c) for a, p, c in test])
    mean_err = mean_relative_error([(means.predict(a, p), c) for a, p, c in test])
    assert means.predict("sc", [1]) == pytest.approx(sum(c for a, _, c in train if a == "sc") / 150)
    # Recorded in docs/results/2026-11-22-fairserve-justitia-step-model.md; the margin is wide, not tuned to pass.
    assert model_err < 0.6 * mean_err, (model_err, mean_err)


def test_fallbacks_type_mean_then_global_mean_then_caller():
    pred = DemandPredictor(min_samples=5)
    assert pred.predict("sc", [1, 2], fallback=lambda: 123.0) == 123.0
    assert pred.predict("sc", [1, 2]) == 0.0
    pred.observe("sc", [1, 2], 100.0)
    pred.observe("sc", [3], 300.0)
    pred.observe("fv", [3], 1000.0)
    assert pred.predict("sc", [9]) == pytest.approx(200.0)
    assert pred.predict("unknown", [9]) == pytest.approx(1400.0 / 3)
    assert pred.fit() == {}  # too few samples for any model
    assert not pred.has_model("sc")


def test_other_types_mean_beats_the_callers_fallback_only_past_min_samples():
    pred = DemandPredictor(min_samples=3)
    pred.observe("warm-up", [1, 2, 3], 5.0)  # e.g. the server's warm-up request, the first run it sees
    assert pred.predict("mapreduce", [7] * 1500, fallback=lambda: 9000.0) == 9000.0
    pred.observe("a", [1], 10.0)
    pred.observe("b", [1], 30.0)
    assert pred.predict("mapreduce", [7] * 1500, fallback=lambda: 9000.0) == pytest.approx(15.0)


def test_text_prompts_and_history_round_trip(tmp_path):
    pred = DemandPredictor(min_samples=4, seed=0)
    rng = random.Random(0)
    for _ in range(30):
        words = rng.randint(5, 60)
        pred.observe("qa", " ".join(rng.choice(["what", "why", "how", "the", "a"]) for _ in range(words)), 10.0 * words)
    path = tmp_path / "history.jsonl"
    pred.save_history(str(path))
    again = DemandPredictor(min_samples=4, seed=0)
    assert again.load_history(str(path)) == 30
    assert again.fit() == {"qa": 30}
    short, long = again.predict("qa", "why " * 5), again.predict("qa", "why " * 60)
    assert 0 < short < long


def test_bad_history_names_file_and_line(tmp_path):
    path = tmp_path / "h.jsonl"
    path.write_text('{"app": "sc", "prompt": [1], "cost": 1}\n\n{"app": "sc", "prompt": 5, "cost": 1}\n')
    with pytest.raises(ValueError, match=r"h.jsonl:3"):
        DemandPredictor().load_history(str(path))
    with pytest.raises(ValueError, match="cost"):
        DemandPredictor().observe("sc", [1], -1.0)
