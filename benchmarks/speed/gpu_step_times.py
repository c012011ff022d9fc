"""Step times of a Llama-shaped model with random weights, for the simulator's cost model.

Plain PyTorch (no SGLang, no sglang_fair import: it runs with nothing but
torch), so it can measure any GPU the simulator should model. Writes a
calibration file for ``python -m sglang_fair.sim.fit``:

* ``prefill``: one request extending ``new`` tokens on ``cached`` cached ones;
* ``decode``: one step of ``batch`` requests of ``context`` tokens each;
* ``prefill_batch``: several requests extended in one forward pass, which the
  fit does not use: its error says whether the cost model's way of adding
  requests up (one fixed cost, per-request attention terms) holds.

Linear layers run on all tokens of a batch at once, attention per request
(flash attention through ``scaled_dot_product_attention``, the cached prefix
read from a KV cache); logits only for each request's last token, as a
serving engine computes them. On CUDA every row is also captured in a CUDA
graph and replayed (``ms``), which removes Python's launch cost as SGLang's
graphs do; ``eager_ms`` is the same work launched op by op.

    python3 benchmarks/speed/gpu_step_times.py --out calibration.json                 # 8B and 3B, ~3 min on an H100
    python3 benchmarks/speed/gpu_step_times.py --model tiny --device cpu --quick --out /tmp/c.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention.bias import causal_lower_right


@dataclass(frozen=True)
class Shape:
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int


SHAPES = {
    "llama-3.1-8b": Shape(4096, 14336, 32, 32, 8, 128, 128256),
    "llama-3.2-3b": Shape(3072, 8192, 28, 24, 8, 128, 128256),
    "tiny": Shape(128, 256, 2, 4, 2, 32, 1024),
}
ROPE_THETA = 500_000.0

# The grid of the H100 calibration file the shipped profiles were fitted on, plus batched prefills.
PREFILL = [(new, 0) for new in (64, 256, 1024, 4096, 8192)] + [
    (new, cached) for cached in (2048, 16384) for new in (64, 256, 1024, 4096)]
DECODE = [(b, ctx) for ctx in (256, 1024) for b in (1, 8, 32, 64, 128, 256)] + [(b, 4096) for b in (1, 8, 32, 64)]
PREFILL_BATCH = ([[[64, 2048]] * k for k in (2, 4, 8, 16)] + [[[256, 0]] * k for k in (2, 4, 8)]
                 + [[[1024, 16384]] * 4, [[4096, 0]] * 2, [[64, 2048], [256, 0], [1024, 16384], [64, 0], [512, 2048]]])
QUICK_PREFILL = [(16, 0), (64, 0), (16, 64), (64, 64), (32, 32)]
QUICK_DECODE = [(1, 32), (4, 32), (1, 64), (4, 64)]
QUICK_PREFILL_BATCH = [[[16, 64]] * 2, [[16, 0], [32, 64]]]


class Model:
    """Random weights of ``shape``; ``prefill`` and ``decode`` run its forward pass."""

    def __init__(self, shape: Shape, device: str, dtype: torch.dtype, seed: int = 0) -> None:
        self.shape, self.device, self.dtype = shape, device, dtype
        gen = torch.Generator(device=device).manual_seed(seed)
        s = shape

        def weight(*size: int) -> torch.Tensor:
            return torch.empty(*size, device=device, dtype=dtype).normal_(0.0, 0.02, generator=gen)

        qkv_out = (s.heads + 2 * s.kv_heads) * s.head_dim
        self.embed = weight(s.vocab, s.hidden)
        self.layers = [dict(qkv=weight(s.hidden, qkv_out), o=weight(s.heads * s.head_dim, s.hidden),
                            gate_up=weight(s.hidden, 2 * s.intermediate), down=weight(s.intermediate, s.hidden))
                       for _ in range(s.layers)]
        self.lm_head = weight(s.hidden, s.vocab)
        self.inv_freq = 1.0 / ROPE_THETA ** (torch.arange(0, s.head_dim, 2, device=device).float() / s.head_dim)

    def new_cache(self, batch: int, tokens: int) -> torch.Tensor:
        """KV cache [layers, K/V, batch, kv_heads, tokens, head_dim], random (the cached prefix's stand-in)."""
        s = self.shape
        return torch.randn(s.layers, 2, batch, s.kv_heads, tokens, s.head_dim, device=self.device, dtype=self.dtype)

    def _rope_tables(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # Once per forward pass, shared by every layer (as SGLang's cos/sin cache).
        angles = positions.float()[:, None] * self.inv_freq[None, :]
        angles = torch.cat([angles, angles], -1)[:, None, :]
        return angles.cos().to(self.dtype), angles.sin().to(self.dtype)

    @staticmethod
    def _rope(x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        # x [tokens, heads, head_dim]; rotate-half layout, as Llama's.
        cos, sin = rope
        half = x.shape[-1] // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], -1)
        return x * cos + rotated * sin

    @staticmethod
    def _norm(x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-5).to(x.dtype)

    def _mlp(self, x: torch.Tensor, layer: dict) -> torch.Tensor:
        gate, up = (self._norm(x) @ layer["gate_up"]).chunk(2, -1)
        return x + (F.silu(gate) * up) @ layer["down"]

    def _qkv(self, x: torch.Tensor, layer: dict, rope: tuple[torch.Tensor, torch.Tensor]):
        s = self.shape
        q, k, v = (self._norm(x) @ layer["qkv"]).split(
            [s.heads * s.head_dim, s.kv_heads * s.head_dim, s.kv_heads * s.head_dim], -1)
        q = self._rope(q.view(-1, s.heads, s.head_dim), rope)
        k = self._rope(k.view(-1, s.kv_heads, s.head_dim), rope)
        return q, k, v.view(-1, s.kv_heads, s.head_dim)

    def prefill_inputs(self, requests: list[tuple[int, int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Positions of the new tokens and the index of each request's last one: made before
        a CUDA graph capture, which cannot copy from the host."""
        positions = torch.cat([torch.arange(c, c + n) for n, c in requests]).to(self.device)
        last = (torch.tensor([n for n, _ in requests]).cumsum(0) - 1).to(self.device)
        return positions, last

    def prefill(self, ids: torch.Tensor, requests: list[tuple[int, int]], caches: list[torch.Tensor],
                positions: torch.Tensor, last: torch.Tensor) -> torch.Tensor:
        """Extend each request (new, cached) by its ``new`` tokens of ``ids`` (concatenated);
        ``caches[i]``: request i's cache (batch 1) holding its first ``cached`` tokens;
        ``positions``, ``last``: from ``prefill_inputs``. Returns each request's last-token logits."""
        s = self.shape
        x = self.embed[ids]
        rope = self._rope_tables(positions)
        for li, layer in enumerate(self.layers):
            q, k, v = self._qkv(x, layer, rope)
            outs, start = [], 0
            for (n, c), cache in zip(requests, caches):
                cache[li, 0, 0, :, c:c + n] = k[start:start + n].transpose(0, 1)
                cache[li, 1, 0, :, c:c + n] = v[start:start + n].transpose(0, 1)
                qi = q[start:start + n].transpose(0, 1)[None]
                ki, vi = cache[li, 0, :, :, :c + n], cache[li, 1, :, :, :c + n]
                # The new tokens see the whole cached prefix: causal, aligned to the lower right.
                mask = causal_lower_right(n, c + n) if c else None
                o = F.scaled_dot_product_attention(qi, ki, vi, attn_mask=mask, is_causal=not c, enable_gqa=True)
                outs.append(o[0].transpose(0, 1).reshape(n, s.heads * s.head_dim))
                start += n
            x = self._mlp(x + torch.cat(outs) @ layer["o"], layer)
        return self._norm(x[last]) @ self.lm_head

    def decode(self, ids: torch.Tensor, cache: torch.Tensor, context: int) -> torch.Tensor:
        """One token for each of ``len(ids)`` requests whose first ``context`` tokens are in ``cache``."""
        s = self.shape
        rope = self._rope_tables(torch.full((ids.shape[0],), context, device=self.device))
        x = self.embed[ids]
        for li, layer in enumerate(self.layers):
            q, k, v = self._qkv(x, layer, rope)
            cache[li, 0, :, :, context] = k
            cache[li, 1, :, :, context] = v
            o = F.scaled_dot_product_attention(q[:, :, None], cache[li, 0, :, :, :context + 1],
                                               cache[li, 1, :, :, :context + 1], enable_gqa=True)
            x = self._mlp(x + o.reshape(-1, s.heads * s.head_dim) @ layer["o"], layer)
        return self._norm(x) @ self.lm_head


def time_ms(fn: Callable[[], object], device: str, warmup: int, repeats: int) -> float:
    """Median wall time of ``fn`` in ms (CUDA events on a GPU)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        if device.startswith("cuda"):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def measure(fn: Callable[[], object], device: str, warmup: int, repeats: int, graphs: bool) -> dict:
    """``eager_ms`` and, captured in a CUDA graph when ``graphs``, ``ms`` (else ``ms`` = eager)."""
    eager = time_ms(fn, device, warmup, repeats)
    if not graphs:
        return {"ms": eager, "eager_ms": eager}
    side = torch.cuda.Stream()  # capture needs warm-up off the default stream
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    replayed = time_ms(graph.replay, device, warmup, repeats)
    del graph
    return {"ms": replayed, "eager_ms": eager}


def rows_for(model_name: str, model: Model, args: argparse.Namespace, skipped: list[str]) -> list[dict]:
    vocab, device = model.shape.vocab, model.device
    graphs = device.startswith("cuda") and not args.no_graphs
    quick = args.quick
    prefill_rows = [[[n, c]] for n, c in (QUICK_PREFILL if quick else PREFILL)]
    jobs = [("prefill", r) for r in prefill_rows] + [("prefill_batch", r) for r in
                                                      (QUICK_PREFILL_BATCH if quick else PREFILL_BATCH)]
    jobs += [("decode", [b, ctx]) for b, ctx in (QUICK_DECODE if quick else DECODE)]
    rows = []
    for kind, spec in jobs:
        label = f"{model_name} {kind} {spec}"
        try:
            if kind == "decode":
                batch, context = spec
                cache = model.new_cache(batch, context + 1)
                ids = torch.randint(0, vocab, (batch,), device=device)
                timing = measure(lambda: model.decode(ids, cache, context), device, args.warmup, args.repeats, graphs)
                row = {"model": model_name, "kind": kind, "batch": batch, "context": context}
            else:
                requests = [(n, c) for n, c in spec]
                caches = [model.new_cache(1, c + n) for n, c in requests]
                ids = torch.randint(0, vocab, (sum(n for n, _ in requests),), device=device)
                positions, last = model.prefill_inputs(requests)
                timing = measure(lambda: model.prefill(ids, requests, caches, positions, last), device,
                                 args.warmup, args.repeats, graphs)
                row = ({"model": model_name, "kind": kind, "cached": spec[0][1], "new": spec[0][0]}
                       if kind == "prefill" else {"model": model_name, "kind": kind, "requests": spec})
        except torch.cuda.OutOfMemoryError:
            print(f"{label}: out of GPU memory, skipped", flush=True)
            skipped.append(label)
            continue
        finally:
            cache = caches = None  # free this row's KV before the next one allocates
            if device.startswith("cuda"):
                torch.cuda.empty_cache()
        rows.append(row | timing)
        print(f"{label}: {timing['ms']:.3f} ms (eager {timing['eager_ms']:.3f})", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="llama-3.1-8b,llama-3.2-3b",
                    help=f"comma-separated, from {', '.join(SHAPES)}")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--out", required=True, help="calibration JSON to write (rewritten after each model)")
    ap.add_argument("--repeats", type=int, default=10, help="timed runs per row (the median is kept)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="a few small rows (tests)")
    ap.add_argument("--no-graphs", action="store_true", help="no CUDA graphs: ms = eager time")
    args = ap.parse_args(argv)
    models = args.model.split(",")
    unknown = [m for m in models if m not in SHAPES]
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(SHAPES)}")
    if args.repeats < 1 or args.warmup < 0:
        ap.error("--repeats must be >= 1 and --warmup >= 0")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        ap.error("--device cuda: no CUDA device is visible to torch")
    dtype = torch.bfloat16 if args.device.startswith("cuda") else torch.float32
    gpu = torch.cuda.get_device_name(args.device) if args.device.startswith("cuda") else "cpu"
    skipped: list[str] = []
    out = {"meta": {"gpu": gpu, "torch": torch.__version__, "device": args.device, "dtype": str(dtype),
                    "repeats": args.repeats, "warmup": args.warmup, "cuda_graphs": not args.no_graphs,
                    "script": "benchmarks/speed/gpu_step_times.py", "skipped": skipped}, "rows": []}
    path = Path(args.out)
    with torch.inference_mode():
        for name in models:
            model = Model(SHAPES[name], args.device, dtype)
            out["rows"] += rows_for(name, model, args, skipped)
            del model
            path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {len(out['rows'])} rows to {path}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
