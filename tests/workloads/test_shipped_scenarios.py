"""Every shipped scenario replays on the real engine: generated with the tiny model's
vocabulary (the override a run against a server uses), every token id is inside it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sglang_fair.workloads.registry import make_workload
from sglang_fair.workloads.spec import CONFIG_DIR, load_scenario
from sglang_fair.workloads.validate import WorkloadError

TINY_VOCAB = 1024  # sglang_fair/tiny_cpu.py's model


def _scenarios() -> list[Path]:
    """The configs that are workload scenarios (the others are policy configs)."""
    return sorted(p for p in CONFIG_DIR.glob("*.yaml") if "workload" in (yaml.safe_load(p.read_text()) or {}))


def test_the_fairserve_and_justitia_scenarios_are_among_them():
    names = {p.stem for p in _scenarios()}
    assert {"apps_fairserve_abuse", "apps_justitia_mix", "apps_justitia_starvation"} <= names
    assert len(names) >= 20


@pytest.mark.parametrize("path", _scenarios(), ids=lambda p: p.stem)
def test_shipped_scenario_fits_the_tiny_model_vocabulary(path):
    workload = yaml.safe_load(path.read_text())["workload"]
    overrides = {"vocab_size": TINY_VOCAB, "num_programs": 1}
    if workload == "chat":
        overrides["source"] = "synthetic"  # the ShareGPT package is optional; the ids come the same way
    wl = make_workload(workload, str(path), overrides)
    assert wl.meta["vocab_size"] == TINY_VOCAB
    ids = [t for p in wl.programs for call in p.calls for t in call.tokens]
    assert ids and min(ids) >= 0 and max(ids) < TINY_VOCAB


def test_vocab_size_override_sets_the_scenario_not_the_clients():
    path = CONFIG_DIR / "apps_justitia_mix.yaml"
    assert load_scenario(path).vocab_size == 32000
    sc = load_scenario(path, {"vocab_size": 512, "num_programs": 1})
    assert sc.vocab_size == 512
    assert all("vocab_size" not in c.params and c.num_programs == 1 for c in sc.clients)


@pytest.mark.parametrize("value", [1, "big", 2.5, True])
def test_a_bad_vocab_size_override_is_refused(value):
    with pytest.raises(WorkloadError, match="vocab_size override must be an integer >= 2"):
        load_scenario(CONFIG_DIR / "apps_justitia_mix.yaml", {"vocab_size": value})
