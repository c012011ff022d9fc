"""SGLang fields the binding reads that the supported releases name differently.

Each accessor reads the newest release's field and falls back to the older
one's, so the rest of the binding reads one name.
"""

from __future__ import annotations


def cached_prefix_len(req) -> int:
    """The prompt prefix ``req`` found in the radix cache at its last match: ``Req.prefix_len``
    from SGLang 0.5.22, the length of ``Req.prefix_indices`` on 0.5.21."""
    prefix_len = getattr(req, "prefix_len", None)
    return int(prefix_len) if prefix_len is not None else len(req.prefix_indices)


def data_parallel(parallel) -> tuple[int, bool]:
    """(data-parallel ranks, DP attention on) of SGLang's ``ParallelContext``: computed at publish
    from 0.5.22 (``num_dp_ranks``, ``attn_dp_enabled``); 0.5.21 has the configured ``dp_size`` and
    ``enable_dp_attention``, whose ranks are ``dp_size`` whenever DP attention is off."""
    try:
        return parallel.num_dp_ranks, parallel.attn_dp_enabled
    except AttributeError:  # ParallelContext raises it for a field it does not have
        return parallel.dp_size, parallel.enable_dp_attention
