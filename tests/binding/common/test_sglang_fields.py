"""One name for SGLang fields the supported releases name differently."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from sglang_fair.binding.common.sglang_fields import cached_prefix_len, data_parallel


class _Context:
    """Reads fields as SGLang's ParallelContext does: an unknown one raises AttributeError."""

    def __init__(self, **fields) -> None:
        self._fields = fields

    def __getattr__(self, name: str):
        try:
            return self.__dict__["_fields"][name]
        except KeyError:
            raise AttributeError(f"ParallelContext has no {name!r}") from None


def test_the_cached_prefix_is_read_from_either_release():
    assert cached_prefix_len(SimpleNamespace(prefix_len=7, prefix_indices=[1])) == 7  # 0.5.22 and later
    assert cached_prefix_len(SimpleNamespace(prefix_indices=[4, 5, 6])) == 3  # 0.5.21


@pytest.mark.parametrize("context, expected", [
    (_Context(num_dp_ranks=4, attn_dp_enabled=False, dp_size=4, enable_dp_attention=False), (4, False)),
    (_Context(num_dp_ranks=2, attn_dp_enabled=True, dp_size=2, enable_dp_attention=True), (2, True)),
    (_Context(dp_size=8, enable_dp_attention=False), (8, False)),  # 0.5.21
    (_Context(dp_size=2, enable_dp_attention=True), (2, True)),
])
def test_data_parallel_ranks_and_attention_from_either_release(context, expected):
    assert data_parallel(context) == expected


def test_a_context_with_neither_name_is_an_error():
    with pytest.raises(AttributeError, match="dp_size"):
        data_parallel(_Context(tp_size=1))
