"""What ``--tiny-cpu`` serves: SGLang's options for a CPU, and a tiny random-weight Llama model that needs no download.

The directory holds only a config and a tokenizer: servers load it with
`--load-format dummy`, which fills the weights randomly, so the real SGLang
engine (scheduler, radix cache, batching) runs on CPU in seconds. Outputs are
meaningless text; tests look at lengths, ids, timing and cache hits.

The tokenizer is byte-level with no merges (one token per UTF-8 byte), built
locally with the `tokenizers` library so text prompts work. The vocabulary is
padded with `<tok_N>` entries up to the model's vocab size so every id the
model can sample decodes to something.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

# What SGLang needs to serve on CPU (docs/configuration.md): random weights, the
# pure-torch attention backend, and an idle scheduler that sleeps instead of spinning.
CPU_OPTIONS: tuple[tuple[str, ...], ...] = (
    ("--device", "cpu"), ("--attention-backend", "torch_native"), ("--load-format", "dummy"), ("--sleep-on-idle",),
)
# The environment of a CPU server: SGLang's CPU path (without it the rotary embedding imports
# vllm), and only the model classes of sglang_fair/tiny_cpu_models registered at start-up.
CPU_ENV = {"SGLANG_USE_CPU_ENGINE": "1", "SGLANG_EXTERNAL_MODEL_PACKAGE": "sglang_fair.tiny_cpu_models"}
TINY_CPU_MAX_TOTAL_TOKENS = 8192  # KV pool of the tiny server; unset, SGLang sizes it from host RAM (slow)

BOS, EOS, PAD = "<s>", "</s>", "<pad>"
SPECIAL_TOKENS = (BOS, EOS, PAD)  # ids 0, 1, 2
NUM_BYTE_TOKENS = 256
# Bump when the files written change, so a cached directory is rebuilt.
FORMAT_VERSION = 2
CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>\n{{ message['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


@dataclass(frozen=True)
class TinyLlamaSpec:
    """Shape of the tiny model; the defaults start in about 20 s on 2 cores."""

    hidden_size: int = 128
    intermediate_size: int = 256
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    head_dim: int = 32
    num_hidden_layers: int = 2
    vocab_size: int = 1024
    max_position_embeddings: int = 2048

    def __post_init__(self) -> None:
        min_vocab = len(SPECIAL_TOKENS) + NUM_BYTE_TOKENS
        if self.vocab_size < min_vocab:
            raise ValueError(f"vocab_size must be >= {min_vocab} (specials + bytes), got {self.vocab_size}")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")
        if self.hidden_size != self.num_attention_heads * self.head_dim:
            raise ValueError("hidden_size must equal num_attention_heads * head_dim")


def default_cache_dir() -> Path:
    """Where `ensure_tiny_model()` keeps the model unless told otherwise."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(base) / "sglang-fair" / "tiny-llama"


def _write_atomic(path: Path, text: str) -> None:
    # Several test processes may build the shared cache directory at once:
    # each file appears whole or not at all, and all writers agree on content.
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    partial.write_text(text)
    os.replace(partial, path)


def _llama_config(spec: TinyLlamaSpec) -> dict:
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_act": "silu",
        "hidden_size": spec.hidden_size,
        "intermediate_size": spec.intermediate_size,
        "num_attention_heads": spec.num_attention_heads,
        "num_key_value_heads": spec.num_key_value_heads,
        "head_dim": spec.head_dim,
        "num_hidden_layers": spec.num_hidden_layers,
        "vocab_size": spec.vocab_size,
        "max_position_embeddings": spec.max_position_embeddings,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
        "bos_token_id": SPECIAL_TOKENS.index(BOS),
        "eos_token_id": SPECIAL_TOKENS.index(EOS),
        "pad_token_id": SPECIAL_TOKENS.index(PAD),
    }


def _write_tokenizer(directory: Path, vocab_size: int) -> None:
    # Imported here: building the model config needs no third-party package.
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
    for ch in sorted(pre_tokenizers.ByteLevel.alphabet()):
        vocab[ch] = len(vocab)
    while len(vocab) < vocab_size:
        vocab[f"<tok_{len(vocab)}>"] = len(vocab)
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(list(SPECIAL_TOKENS))
    _write_atomic(directory / "tokenizer.json", tokenizer.to_str(pretty=True))
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": BOS,
        "eos_token": EOS,
        "pad_token": PAD,
        "add_bos_token": False,
        "model_max_length": 1 << 20,
        "clean_up_tokenization_spaces": False,
        # So /v1/chat/completions works: role-tagged turns, then the assistant's cue.
        "chat_template": CHAT_TEMPLATE,
    }
    _write_atomic(directory / "tokenizer_config.json", json.dumps(tokenizer_config, indent=2))
    special_map = {"bos_token": BOS, "eos_token": EOS, "pad_token": PAD}
    _write_atomic(directory / "special_tokens_map.json", json.dumps(special_map, indent=2))


def write_tiny_model(directory: str | os.PathLike, spec: TinyLlamaSpec = TinyLlamaSpec()) -> Path:
    """Write config, generation config and tokenizer into `directory`; return it."""
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    config = _llama_config(spec)
    _write_atomic(path / "config.json", json.dumps(config, indent=2))
    generation = {
        "bos_token_id": config["bos_token_id"],
        "eos_token_id": config["eos_token_id"],
        "pad_token_id": config["pad_token_id"],
    }
    _write_atomic(path / "generation_config.json", json.dumps(generation, indent=2))
    _write_tokenizer(path, spec.vocab_size)
    stamp = {"format_version": FORMAT_VERSION, "spec": asdict(spec)}
    # Written last: its presence marks a complete directory.
    _write_atomic(path / "sglang_fair_tiny_model.json", json.dumps(stamp, indent=2))
    return path


def ensure_tiny_model(directory: str | os.PathLike | None = None, spec: TinyLlamaSpec = TinyLlamaSpec()) -> Path:
    """Return a tiny model directory, writing it only if missing or stale."""
    path = Path(directory) if directory is not None else default_cache_dir()
    stamp_file = path / "sglang_fair_tiny_model.json"
    expected = {"format_version": FORMAT_VERSION, "spec": asdict(spec)}
    if stamp_file.is_file():
        try:
            if json.loads(stamp_file.read_text()) == expected:
                return path
        except json.JSONDecodeError:
            pass  # a torn write: rebuild below
    return write_tiny_model(path, spec)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="Write the tiny random-weight Llama model directory.")
    parser.add_argument("directory", nargs="?", help=f"target directory (default: {default_cache_dir()})")
    print(ensure_tiny_model(parser.parse_args().directory))
