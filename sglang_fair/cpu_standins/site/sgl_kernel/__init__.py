"""Import-only stand-in for sgl_kernel, for CPU test machines only.

SGLang's CPU engine (SGLANG_USE_CPU_ENGINE=1) imports a few names from
sgl_kernel at module level. The PyPI sglang-kernel wheel is CUDA-only and
cannot load without a GPU. This stand-in implements, in plain torch, the one
function the CPU server path calls while serving a Llama model, and defines
the other names it imports as stubs that raise NotImplementedError.

Deliberately absent:
- any `torch.ops.sgl_kernel` registration: SGLang probes
  `hasattr(torch.ops.sgl_kernel, "convert_weight_packed")` to switch onto its
  Intel AMX kernels, which this stand-in does not provide;
- a catch-all module `__getattr__`: SGLang guards optional kernels with
  `try: from sgl_kernel import X / except ImportError`, and those fallbacks
  must keep working, so unknown names fail to import as usual.

Never install this on a GPU machine, where the real sglang-kernel belongs.
"""

from __future__ import annotations

import torch

__version__ = "0.0.0+sglangfair.cpu.standin"


def assign_req_to_token_pool_cpu(
    req_pool_indices: torch.Tensor,
    req_to_token: torch.Tensor,
    start_offset: torch.Tensor,
    end_offset: torch.Tensor,
    out_cache_loc: torch.Tensor,
    pool_len: int,
) -> None:
    """Write each request's new KV slot indices into the req-to-token table.

    Request i owns row `req_pool_indices[i]`; its slots for token positions
    `[start_offset[i], end_offset[i])` are the next `end - start` entries of
    `out_cache_loc`, which holds all requests' new slots back to back.
    """
    if req_to_token.shape[1] != pool_len:
        raise ValueError(f"pool_len {pool_len} != req_to_token row length {req_to_token.shape[1]}")
    starts = start_offset.tolist()
    ends = end_offset.tolist()
    rows = req_pool_indices.tolist()
    taken = 0
    for row, start, end in zip(rows, starts, ends):
        count = end - start
        if count <= 0:
            continue
        req_to_token[row, start:end] = out_cache_loc[taken : taken + count].to(req_to_token.dtype)
        taken += count


def _not_implemented(name: str):
    """A stub for a kernel SGLang imports on CPU but a Llama test server never calls."""

    def stub(*args: object, **kwargs: object) -> None:
        raise NotImplementedError(
            f"sgl_kernel.{name} is not implemented by sglang-fair's CPU stand-in "
            "(sglang_fair/cpu_standins); only assign_req_to_token_pool_cpu is"
        )

    stub.__name__ = stub.__qualname__ = name
    return stub


# Imported at module level under SGLANG_USE_CPU_ENGINE=1, never called when
# serving a Llama model with the torch_native attention backend and no
# speculative decoding. From sglang/kernels/ops/kvcache/cache_move.py:
copy_all_layer_kv_cache_cpu = _not_implemented("copy_all_layer_kv_cache_cpu")
# From sglang/kernels/ops/speculative/{spec_tree,eagle,cache_locs}.py:
build_tree_kernel_efficient_cpu = _not_implemented("build_tree_kernel_efficient_cpu")
verify_tree_greedy_cpu = _not_implemented("verify_tree_greedy_cpu")
assign_draft_cache_locs_contiguous_cpu = _not_implemented("assign_draft_cache_locs_contiguous_cpu")
assign_extend_cache_locs_cpu = _not_implemented("assign_extend_cache_locs_cpu")
fill_accept_out_cache_loc_cpu = _not_implemented("fill_accept_out_cache_loc_cpu")
fill_bonus_tokens_cpu = _not_implemented("fill_bonus_tokens_cpu")
