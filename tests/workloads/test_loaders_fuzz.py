"""Property tests of the trace loader: any file a user hands ``bench run --trace``
is either loaded or refused with a LoaderError naming the file, nothing else."""

from __future__ import annotations

import csv
import io
import json
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from sglang_fair.workloads.loaders import LoaderError, load_trace

VOCAB = 1000
# Values of every JSON type, including numbers past int64 and float overflow (1e400 parses as inf).
scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20),
                    st.sampled_from(["1e400", "-0", "²", " 3 ", "1 2 x", "nan", "inf", "0x10"]))
values = st.one_of(scalars, st.lists(scalars, max_size=4), st.dictionaries(st.text(max_size=5), scalars, max_size=2))
fields = st.sampled_from(["timestamp", "client", "prompt", "token_ids", "output_len", "other"])
rows = st.lists(st.dictionaries(fields, values, max_size=6), min_size=0, max_size=4)


def _load(name: str, text: str):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        try:
            wl = load_trace(path, VOCAB)
        except LoaderError as e:
            assert str(path) in str(e)
            return None
    return wl


def _check(wl) -> None:
    for p in wl.programs:
        assert p.arrival >= 0 and p.client
        (call,) = p.calls
        assert call.max_new_tokens >= 1 and call.tokens and all(0 <= t < VOCAB for t in call.tokens)


@settings(max_examples=300, deadline=None)
@given(records=rows, junk=st.lists(st.text(max_size=30), max_size=2))
def test_jsonl_trace_is_loaded_or_refused_with_a_loader_error(records, junk):
    text = "\n".join([json.dumps(r) for r in records] + junk)
    wl = _load("trace.jsonl", text)
    if wl is not None:
        _check(wl)


@settings(max_examples=300, deadline=None)
@given(records=rows)
def test_csv_trace_is_loaded_or_refused_with_a_loader_error(records):
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=["timestamp", "client", "prompt", "token_ids", "output_len", "other"])
    writer.writeheader()
    for r in records:
        writer.writerow({k: (" ".join(map(str, v)) if isinstance(v, list) else v) for k, v in r.items()})
    wl = _load("trace.csv", out.getvalue())
    if wl is not None:
        _check(wl)


def test_an_output_length_past_float_range_is_a_loader_error(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"timestamp": 0, "client": "a", "prompt": "hi", "output_len": 1e400}\n')
    try:
        load_trace(path, VOCAB)
    except LoaderError as e:
        assert "record 1" in str(e) and "output_len" in str(e)
    else:
        raise AssertionError("an infinite output_len was accepted")
