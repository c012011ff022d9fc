"""The cost model against the calibration rows it was fitted on, profile
selection, extrapolation flags, and the refit command."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from sglang_fair.sim.costmodel import CostModel, ProfileError, available_profiles, load_profile
from sglang_fair.sim.fit import CalibrationError, fit_calibration, main

# A copy of the shared H100 calibration file the shipped profiles were fitted to.
CALIBRATION = Path(__file__).parent / "data" / "h100-pytorch-llama.json"
MODELS = {"llama-3.1-8b": "h100-llama-3.1-8b", "llama-3.2-3b": "h100-llama-3.2-3b"}


def _rows():
    return json.loads(CALIBRATION.read_text())


@pytest.mark.parametrize("model", sorted(MODELS))
def test_profiles_fit_calibration_rows_within_ten_percent(model):
    cost = CostModel(load_profile(MODELS[model]))
    for kind in ("prefill", "decode"):
        errors = []
        for r in _rows()["rows"]:
            if r["model"] != model or r["kind"] != kind:
                continue
            pred = (cost.prefill_ms([(r["new"], r["cached"])]) if kind == "prefill"
                    else cost.decode_ms(r["batch"], r["batch"] * r["context"]))
            errors.append(abs(pred - r["ms"]) / r["ms"])
        assert len(errors) >= 10
        assert statistics.median(errors) <= 0.10, (kind, statistics.median(errors))
    assert cost.extrapolated == {"prefill": 0, "decode": 0}  # every row is inside the fitted box


def test_times_grow_with_work():
    cost = CostModel(load_profile("h100-llama-3.1-8b"))
    assert cost.prefill_ms([(4096, 0)]) > cost.prefill_ms([(1024, 0)])
    assert cost.prefill_ms([(1024, 16384)]) > cost.prefill_ms([(1024, 0)])
    assert cost.decode_ms(64, 64 * 4096) > cost.decode_ms(64, 64 * 256) > cost.decode_ms(8, 8 * 256)


def test_extrapolation_is_counted():
    cost = CostModel(load_profile("h100-llama-3.2-3b"))
    cost.prefill_ms([(100_000, 0)])
    cost.decode_ms(1000, 1000 * 100)
    cost.decode_ms(4, 4 * 100_000)
    assert cost.extrapolated == {"prefill": 1, "decode": 2}


def test_unknown_profile_names_the_choices():
    assert set(MODELS.values()) <= set(available_profiles())
    with pytest.raises(ProfileError, match="unknown simulator profile 'a100-nope'.*h100-llama-3.1-8b"):
        load_profile("a100-nope")


def test_refit_reproduces_shipped_profiles(tmp_path, capsys):
    cal = tmp_path / "cal.json"
    cal.write_text(json.dumps(_rows()))
    rc = main([str(cal), "--kv-pool", "llama-3.1-8b=420000", "--kv-pool", "llama-3.2-3b=580000",
               "--out", str(tmp_path / "profiles")])
    assert rc == 0
    for name in MODELS.values():
        fresh = json.loads((tmp_path / "profiles" / f"{name}.json").read_text())
        shipped = load_profile(name).to_json()
        assert fresh["prefill"] == pytest.approx(shipped["prefill"])
        assert fresh["decode"] == pytest.approx(shipped["decode"])
    assert "median" in capsys.readouterr().out
    by_path = load_profile(str(tmp_path / "profiles" / "h100-llama-3.2-3b.json"))  # selectable by file path
    assert by_path.name == "h100-llama-3.2-3b" and by_path.kv_pool_tokens == 580000


def test_refit_rejects_bad_input(tmp_path, capsys):
    raw = _rows()
    with pytest.raises(CalibrationError, match="no KV pool size for model"):
        fit_calibration(raw, "cal.json", {})
    bad = {"rows": [{"model": "m", "kind": "prefill", "new": 1, "ms": 1.0}]}
    with pytest.raises(CalibrationError, match="row 0: missing cached"):
        fit_calibration(bad, "cal.json", {"m": 1000})
    cal = tmp_path / "broken.json"
    cal.write_text("{not json")
    assert main([str(cal), "--kv-pool", "m=10", "--out", str(tmp_path)]) == 2
    assert "cannot read calibration file" in capsys.readouterr().err


def test_decode_segment_equals_the_sum_of_its_steps():
    cost = CostModel(load_profile("h100-llama-3.1-8b"))
    batch, ctx, steps = 48, 48 * 700, 37
    one_by_one = sum(cost.decode_ms(batch, ctx + batch * i) for i in range(steps))
    assert cost.decode_steps_ms(batch, ctx, steps) == pytest.approx(one_by_one)
    wide = CostModel(load_profile("h100-llama-3.1-8b"))
    wide.decode_steps_ms(300, 300 * 100, 5)  # batch beyond the fitted 256
    assert wide.extrapolated["decode"] == 5


def test_batched_prefill_rows_are_checked_not_fitted():
    raw = _rows()
    rows = [r for r in raw["rows"] if r["model"] == "llama-3.2-3b"]
    plain = fit_calibration({"meta": raw["meta"], "rows": rows}, "cal.json", {"llama-3.2-3b": 1000})[0]
    cost = CostModel(plain)
    batch = [[64, 2048], [256, 0]]
    exact = cost.prefill_ms([tuple(q) for q in batch])
    extra = [{"model": "llama-3.2-3b", "kind": "prefill_batch", "requests": batch, "ms": exact * 1.25}]
    with_batch = fit_calibration({"meta": raw["meta"], "rows": rows + extra}, "cal.json", {"llama-3.2-3b": 1000})[0]
    assert with_batch.prefill == plain.prefill  # not fitted on
    assert with_batch.fit_error["prefill_batch"] == pytest.approx({"median": 0.2, "max": 0.2, "rows": 1})
    for requests in ([], [[64]], [[64, -1]], "x"):
        bad = [{"model": "llama-3.2-3b", "kind": "prefill_batch", "requests": requests, "ms": 1.0}]
        with pytest.raises(CalibrationError, match="'requests' must be a non-empty list of \\[new, cached\\]"):
            fit_calibration({"rows": rows + bad}, "cal.json", {"llama-3.2-3b": 1000})


@pytest.mark.parametrize("calibration, tag, pools, names", [
    ("h200-pytorch-llama.json", None, {"llama-3.1-8b": 916069, "llama-3.2-3b": 1130947},
     ["h200-llama-3.1-8b", "h200-llama-3.2-3b"]),
    ("h100-sdpa-llama.json", "h100-sdpa", {"llama-3.1-8b": 419019}, ["h100-sdpa-llama-3.1-8b"]),
])
def test_gpu_step_times_profiles_refit_from_their_files(tmp_path, calibration, tag, pools, names):
    argv = [str(CALIBRATION.parent / calibration), "--out", str(tmp_path)]
    argv += [f"--kv-pool={m}={n}" for m, n in pools.items()] + (["--tag", tag] if tag else [])
    assert main(argv) == 0
    for name in names:
        fresh = json.loads((tmp_path / f"{name}.json").read_text())
        shipped = load_profile(name)
        assert fresh["prefill"] == pytest.approx(shipped.to_json()["prefill"])
        assert fresh["decode"] == pytest.approx(shipped.to_json()["decode"])
        assert shipped.kv_pool_tokens == pools[shipped.model] and shipped.source == calibration
        assert shipped.fit_error["prefill"]["median"] <= 0.10 and shipped.fit_error["decode"]["median"] <= 0.10


def test_a_tag_names_the_profiles_and_a_bad_one_is_refused(tmp_path, capsys):
    src = str(CALIBRATION.parent / "h100-sdpa-llama.json")
    assert main([src, "--kv-pool", "llama-3.1-8b=1000", "--tag", "My GPU", "--out", str(tmp_path)]) == 2
    assert "--tag: expected lower-case letters" in capsys.readouterr().err
    assert main([src, "--kv-pool", "llama-3.1-8b=1000", "--tag", "x1", "--out", str(tmp_path)]) == 0
    assert load_profile(str(tmp_path / "x1-llama-3.1-8b.json")).name == "x1-llama-3.1-8b"
