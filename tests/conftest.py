"""Shared fixtures. Keep this small: fixtures used by one directory live there."""

from pathlib import Path

import pytest

from sglang_fair.tiny_cpu import write_tiny_model


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random-weight Llama model directory (config + tokenizer; serve with --load-format dummy)."""
    return write_tiny_model(tmp_path_factory.mktemp("tiny-llama"))
