"""The tiny model directory: a valid Llama config and a local byte-level tokenizer."""

import json

import pytest

from sglang_fair.tiny_cpu import CPU_ENV, TinyLlamaSpec, ensure_tiny_model, write_tiny_model


def test_config_describes_the_requested_llama(tmp_path):
    spec = TinyLlamaSpec(num_hidden_layers=3)
    config = json.loads((write_tiny_model(tmp_path, spec) / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert config["num_hidden_layers"] == 3
    assert config["vocab_size"] == spec.vocab_size
    assert config["hidden_size"] == config["num_attention_heads"] * config["head_dim"]


def test_tokenizer_round_trips_text_and_covers_the_whole_vocab(tiny_model_dir):
    transformers = pytest.importorskip("transformers")
    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model_dir)
    assert len(tokenizer) == TinyLlamaSpec().vocab_size
    text = "Fair share, naïve café: 42!"
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert len(ids) == len(text.encode())  # byte-level, no merges
    assert tokenizer.decode(ids) == text
    assert tokenizer.eos_token_id == json.loads((tiny_model_dir / "config.json").read_text())["eos_token_id"]
    # Any id the model can sample decodes without error.
    assert tokenizer.decode([TinyLlamaSpec().vocab_size - 1]) == "<tok_1023>"


def test_ensure_reuses_a_complete_directory_and_rebuilds_a_different_one(tmp_path):
    path = ensure_tiny_model(tmp_path)
    config = path / "config.json"
    config.write_text('{"marker": "not rewritten"}')
    assert ensure_tiny_model(tmp_path) == path
    assert json.loads(config.read_text()) == {"marker": "not rewritten"}
    ensure_tiny_model(tmp_path, TinyLlamaSpec(num_hidden_layers=1))
    assert json.loads(config.read_text())["num_hidden_layers"] == 1


def test_inconsistent_spec_is_refused():
    with pytest.raises(ValueError, match="vocab_size"):
        TinyLlamaSpec(vocab_size=100)
    with pytest.raises(ValueError, match="head_dim"):
        TinyLlamaSpec(hidden_size=100)


@pytest.mark.engine
def test_a_cpu_server_registers_the_tiny_models_architecture_alone(tiny_model_dir):
    # SGLang's registry built as a CPU server builds it (CPU_ENV): the tiny model's class, and no other.
    registry = pytest.importorskip("sglang.srt.models.registry")
    classes = registry.import_model_classes(CPU_ENV["SGLANG_EXTERNAL_MODEL_PACKAGE"], strict=True)
    architecture = json.loads((tiny_model_dir / "config.json").read_text())["architectures"][0]
    assert list(classes) == [architecture]
    from sglang.srt.models.llama import LlamaForCausalLM

    assert classes[architecture] is LlamaForCausalLM
