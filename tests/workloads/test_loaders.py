"""Loaders for local files: good files and malformed ones (error names file and record)."""

import json

import pytest

from sglang_fair.workloads.loaders import LoaderError, load_conversations, load_gsm8k, load_loogle, load_trace
from sglang_fair.workloads.registry import build_workload
from sglang_fair.workloads.spec import parse_scenario


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def jsonl(*objs):
    return "\n".join(json.dumps(o) for o in objs) + "\n"


def test_gsm8k_good_and_used_by_tot(tmp_path):
    p = write(tmp_path, "gsm.jsonl", jsonl({"question": "Tom has 3 apples.", "answer": "3"},
                                           {"question": "What is 2+2?", "answer": "4"}))
    assert load_gsm8k(p) == ["Tom has 3 apples.", "What is 2+2?"]
    wl = build_workload(parse_scenario({"workload": "tot", "defaults": {"questions_file": str(p), "height": 1,
                                                                        "template_tokens": 0, "step_tokens": 1},
                                        "clients": [{"name": "a"}]}))
    assert all(len(p.calls[0].tokens) == 6 + 1 for p in wl.programs)  # 6 pieces each + 1 step token


@pytest.mark.parametrize("text, message", [
    ('{"question": "ok"}\n{"question": \n', "record 2: invalid JSON"),
    ('{"question": "ok"}\n{"answer": "4"}\n', "record 2: missing a non-empty text field"),
    ('[1, 2]\n', "record 1: expected a JSON object"),
    ("\n", "no records"),
])
def test_gsm8k_malformed(tmp_path, text, message):
    p = write(tmp_path, "gsm.jsonl", text)
    with pytest.raises(LoaderError, match=message) as e:
        load_gsm8k(p)
    assert str(p) in str(e.value)


def test_loogle_formats(tmp_path):
    p = write(tmp_path, "loogle.jsonl", jsonl(
        {"context": "A long document.", "qa_pairs": [{"Q": "What?", "A": "x"}, {"Q": "Who?", "A": "y"}]},
        {"input": "Other doc.", "qa_pairs": "[{'Q': 'Why?', 'A': 'z'}]"},
        {"document": "Third.", "question": "When?"},
    ))
    docs = load_loogle(p)
    assert [d.questions for d in docs] == [("What?", "Who?"), ("Why?",), ("When?",)]
    bad = write(tmp_path, "bad.jsonl", jsonl({"context": "doc", "qa_pairs": [{"A": "no question"}]}))
    with pytest.raises(LoaderError, match=r"bad.jsonl: record 1: qa pair 1"):
        load_loogle(bad)


def test_conversations_sharegpt_and_arena(tmp_path):
    share = write(tmp_path, "share.json", json.dumps([
        {"id": "a", "conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"},
                                      {"from": "human", "value": "more"}, {"from": "gpt", "value": "sure"}]},
        {"id": "b", "conversations": [{"from": "gpt", "value": "starts with the model"}]},
    ]))
    assert load_conversations(share) == [[("hi", "hello"), ("more", "sure")]]
    arena = write(tmp_path, "arena.json", json.dumps([
        {"conversation_a": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}]))
    assert load_conversations(arena) == [[("q", "a")]]
    bad = write(tmp_path, "bad.json", json.dumps([{"conversations": [{"from": "human"}]}]))
    with pytest.raises(LoaderError, match="bad.json: record 1: a message lacks"):
        load_conversations(bad)


def test_truncated_conversations_only_when_allowed(tmp_path):
    full = json.dumps([{"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}]}] * 3)
    p = write(tmp_path, "cut.json", full[: len(full) - 20])
    with pytest.raises(LoaderError, match="cut.json: invalid JSON"):
        load_conversations(p)
    assert len(load_conversations(p, allow_truncated=True)) == 2


def test_trace_csv_and_jsonl(tmp_path):
    csv_path = write(tmp_path, "t.csv", "timestamp,client,prompt,token_ids,output_len\n"
                                       "10.5,alice,hello world,,8\n"
                                       "10.0,bob,,1 2 3,4\n")
    wl = load_trace(csv_path, vocab_size=1024)
    assert [(p.client, p.arrival) for p in wl.programs] == [("bob", 0.0), ("alice", 0.5)]
    assert wl.programs[0].calls[0].tokens == (1, 2, 3) and wl.programs[0].calls[0].max_new_tokens == 4
    assert len(wl.programs[1].calls[0].tokens) == 4  # hell o worl d
    jl = write(tmp_path, "t.jsonl", jsonl({"timestamp": 0, "client": "a", "token_ids": [5, 6], "output_len": 3}))
    assert load_trace(jl, 1024).programs[0].calls[0].tokens == (5, 6)


@pytest.mark.parametrize("row, message", [
    ('{"timestamp": -1, "client": "a", "prompt": "x", "output_len": 2}', "timestamp must be >= 0"),
    ('{"timestamp": 0, "client": "a", "prompt": "x", "output_len": 0}', "output_len must be >= 1"),
    ('{"timestamp": 0, "client": "a", "token_ids": [5000], "output_len": 2}', r"not an integer in \[0, 1024\)"),
    ('{"timestamp": 0, "client": "a", "output_len": 2}', "needs a non-empty prompt or token_ids"),
    ('{"timestamp": 0, "prompt": "x", "output_len": 2}', "missing client"),
    ('{"client": "a", "prompt": "x", "output_len": 2}', "record 2"),
])
def test_trace_malformed(tmp_path, row, message):
    good = '{"timestamp": 0, "client": "a", "prompt": "x", "output_len": 2}'
    p = write(tmp_path, "trace.jsonl", good + "\n" + row + "\n")
    with pytest.raises(LoaderError, match=message) as e:
        load_trace(p, 1024)
    assert "trace.jsonl: record 2" in str(e.value)
