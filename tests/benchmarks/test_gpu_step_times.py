"""benchmarks/speed/gpu_step_times.py on the CPU: the forward pass is a correct transformer with
a KV cache (so the timed work is the real work), and its rows are in the fit's format."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch

from sglang_fair.sim.costmodel import load_profile
from sglang_fair.sim.fit import fit_errors

_ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("gpu_step_times", _ROOT / "benchmarks" / "speed" / "gpu_step_times.py")
gst = importlib.util.module_from_spec(_spec)
sys.modules["gpu_step_times"] = gst  # its dataclasses look their module up
_spec.loader.exec_module(gst)


@pytest.fixture(scope="module")
def model():
    return gst.Model(gst.SHAPES["tiny"], "cpu", torch.float64)


def _prefill(model, ids, requests, caches):
    return model.prefill(ids, requests, caches, *model.prefill_inputs(requests))


def test_a_prefill_on_a_cached_prefix_equals_the_whole_prefill(model):
    ids = torch.randint(0, model.shape.vocab, (40,))
    whole = _prefill(model, ids, [(40, 0)], [model.new_cache(1, 40)])
    cache = model.new_cache(1, 40)
    _prefill(model, ids[:25], [(25, 0)], [cache])
    split = _prefill(model, ids[25:], [(15, 25)], [cache])
    torch.testing.assert_close(split, whole)
    # A batch of both forms gives each request its own logits.
    again = model.new_cache(1, 40)
    _prefill(model, ids[:25], [(25, 0)], [again])
    batched = _prefill(model, torch.cat([ids, ids[25:]]), [(40, 0), (15, 25)], [model.new_cache(1, 40), again])
    torch.testing.assert_close(batched, torch.cat([whole, whole]))


def test_a_decode_step_equals_the_prefill_of_one_more_token(model):
    ids = torch.randint(0, model.shape.vocab, (2, 30))
    cache = model.new_cache(2, 30)
    for b in range(2):
        one = model.new_cache(1, 30)
        _prefill(model, ids[b, :29], [(29, 0)], [one])
        cache[:, :, b] = one[:, :, 0]
    step = model.decode(ids[:, 29], cache, 29)
    for b in range(2):
        full = _prefill(model, ids[b], [(30, 0)], [model.new_cache(1, 30)])
        torch.testing.assert_close(step[b:b + 1], full)


def test_the_grid_is_the_shipped_calibration_grid():
    raw = json.loads((_ROOT / "tests" / "sim" / "data" / "h100-pytorch-llama.json").read_text())
    rows = [r for r in raw["rows"] if r["model"] == "llama-3.1-8b"]
    assert sorted(gst.PREFILL) == sorted((r["new"], r["cached"]) for r in rows if r["kind"] == "prefill")
    assert sorted(gst.DECODE) == sorted((r["batch"], r["context"]) for r in rows if r["kind"] == "decode")


def test_a_quick_run_writes_rows_that_fit(tmp_path, capsys):
    out = tmp_path / "cal.json"
    assert gst.main(["--model", "tiny", "--device", "cpu", "--quick", "--repeats", "1", "--warmup", "0",
                     "--out", str(out)]) == 0
    raw = json.loads(out.read_text())
    kinds = [r["kind"] for r in raw["rows"]]
    assert kinds.count("prefill") == 5 and kinds.count("decode") == 4 and kinds.count("prefill_batch") == 2
    assert all(r["ms"] > 0 and r["ms"] == r["eager_ms"] for r in raw["rows"])  # no graphs on the CPU
    assert raw["meta"]["gpu"] == "cpu" and raw["meta"]["skipped"] == []
    # Every row is read the way the fit reads it (one timed run is too noisy to fit on here).
    errors = fit_errors(load_profile("h100-llama-3.1-8b"), raw["rows"])
    assert {k: v["rows"] for k, v in errors.items()} == {"prefill": 5, "decode": 4, "prefill_batch": 2}
    assert "wrote 11 rows" in capsys.readouterr().out


def test_bad_arguments_are_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        gst.main(["--model", "gpt-5", "--out", str(tmp_path / "x.json")])
    with pytest.raises(SystemExit):
        gst.main(["--model", "tiny", "--device", "cpu", "--repeats", "0", "--out", str(tmp_path / "x.json")])
    err = capsys.readouterr().err
    assert "unknown model(s) gpt-5" in err and "--repeats must be >= 1" in err
