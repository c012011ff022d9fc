"""The model's vocabulary (read from its config through ``/model_info``) and fitting a
workload's token ids to it before anything is sent."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from sglang_fair.bench.model_vocab import (ModelVocab, VocabularyMismatch, config_vocab_size, fit_to_model,
                                           largest_id, read_model_vocab)
from sglang_fair.workloads.model import Call, Program, Workload
from sglang_fair.workloads.registry import make_workload


def test_config_vocab_size_reads_the_tiny_model(tiny_model_dir):
    assert config_vocab_size(str(tiny_model_dir)) == 1024


def test_config_vocab_size_prefers_the_text_config_and_knows_when_there_is_none(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"vocab_size": 10, "text_config": {"vocab_size": 151936}}))
    assert config_vocab_size(str(tmp_path)) == 151936
    (tmp_path / "config.json").write_text("{not json")
    assert config_vocab_size(str(tmp_path)) is None
    assert config_vocab_size(str(tmp_path / "missing")) is None
    assert config_vocab_size("no-such-org/no-such-model-in-the-cache") is None


class _InfoServer:
    """A server that answers the model info paths given (everything else: 404)."""

    def __init__(self, answers: dict[str, dict]) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                body = answers.get(self.path)
                self.send_response(200 if body is not None else 404)
                self.end_headers()
                if body is not None:
                    self.wfile.write(json.dumps(body).encode())

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> "_InfoServer":
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_read_model_vocab_through_model_info(tiny_model_dir):
    with _InfoServer({"/model_info": {"model_path": str(tiny_model_dir)}}) as server:
        assert read_model_vocab(server.url) == ModelVocab(1024, f"model {tiny_model_dir}")
    with _InfoServer({"/get_model_info": {"model_path": str(tiny_model_dir)}}) as server:  # an older SGLang
        assert read_model_vocab(server.url + "/").size == 1024


def test_read_model_vocab_says_why_it_cannot(tmp_path):
    with _InfoServer({}) as server:
        got = read_model_vocab(server.url)
        assert got.size is None and "HTTP 404" in got.source
    with _InfoServer({"/model_info": {"model_path": str(tmp_path)}}) as server:
        got = read_model_vocab(server.url)
        assert got.size is None and f"model {tmp_path}: no config.json" in got.source


def _mix(vocab_size: int | None = None) -> Workload:
    overrides = {"num_programs": 1} | ({"vocab_size": vocab_size} if vocab_size else {})
    return make_workload("apps", "justitia_mix", overrides)


TINY = ModelVocab(1024, "model tiny")


def test_a_scenario_larger_than_the_model_is_generated_with_the_model_vocabulary():
    wl = _mix()
    assert wl.meta["vocab_size"] == 32000 and largest_id(wl) >= 1024
    fitted, notice = fit_to_model(wl, TINY, chosen=None, regenerate=_mix)
    assert fitted.meta["vocab_size"] == 1024 and largest_id(fitted) < 1024
    assert [p.program_id for p in fitted.programs] == [p.program_id for p in _mix(1024).programs]
    assert "(32000)" in notice and "1024 ids" in notice and "--vocab-size 1024" in notice


def test_a_vocabulary_the_user_chose_is_refused_naming_both_sizes():
    with pytest.raises(VocabularyMismatch) as e:
        fit_to_model(_mix(), TINY, chosen="--set vocab_size=32000", regenerate=_mix)
    message = str(e.value)
    assert "--set vocab_size=32000" in message and "1024 ids" in message and "--vocab-size 1024" in message


def test_a_workload_that_fits_is_sent_as_it_is():
    wl = _mix(1024)
    assert fit_to_model(wl, TINY, chosen="--vocab-size 1024", regenerate=_mix) == (wl, None)
    assert fit_to_model(wl, ModelVocab(128256, "model big"), chosen=None, regenerate=_mix) == (wl, None)


def _trace(ids: tuple[int, ...], vocab_size: int) -> Workload:
    program = Program("a/r1", "a", 0.0, (Call(tokens=ids, max_new_tokens=4),), kind="trace")
    return Workload(name="t", programs=[program], meta={"vocab_size": vocab_size, "source": "t.csv"})


def test_a_trace_is_checked_by_its_ids_and_never_changed():
    fits = _trace((5, 1023), 32000)
    assert fit_to_model(fits, TINY, chosen="--vocab-size 32000", regenerate=None) == (fits, None)
    with pytest.raises(VocabularyMismatch) as e:
        fit_to_model(_trace((5, 29648), 32000), TINY, chosen="--vocab-size 32000", regenerate=None)
    assert "t.csv has token id 29648 (vocabulary 32000)" in str(e.value) and "1024 ids" in str(e.value)


def test_an_unknown_model_vocabulary_is_said_and_the_ids_are_sent():
    wl = _mix()
    fitted, notice = fit_to_model(wl, ModelVocab(None, "model m: no config.json"), chosen=None, regenerate=_mix)
    assert fitted is wl and "could not read the model's vocabulary (model m: no config.json)" in notice
