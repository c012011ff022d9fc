"""Is this install fair and fast on this machine's accelerator? One command, one verdict.

    python -m sglang_fair.bench.gpu_check                     # a GPU: Llama-3.1-8B's shape, dummy weights
    python -m sglang_fair.bench.gpu_check --device cpu --shape tiny --programs 2   # the same logic on CPU

Serves a model of a real model's shape with random weights (no download: the
config and a byte-level tokenizer are written locally), and replays one
workload with a flooding client (``chat_s1_fast``: one client with four times
the others' programs, all arriving at once so the server is saturated) against
three servers in turn:

* ``--policy dlpm`` on SGLang's overlap event loop (its default),
* ``--policy dlpm`` on its normal loop (``--disable-overlap-schedule``),
* SGLang's own ``lpm`` scheduler (the stock throughput to compare with).

Each replay is a run directory (``bench run``) audited against its fairness
bound (``bench audit``). The verdict is PASS when every request was answered
without error, both DLPM runs keep within their bound, and each DLPM run's
throughput is at least ``--min-throughput-ratio`` (default 0.9) of the stock
scheduler's in the same check. It prints one line per run and the verdict,
writes ``verdict.json`` in ``--out``, and exits 0 on PASS, 1 on FAIL, 2 when
it cannot run (no CUDA for ``--device cuda``, a server that does not start).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from sglang_fair.bench.__main__ import main as bench_main
from sglang_fair.bench.audit import AuditError, audit_run
from sglang_fair.testing.server import LocalServer, ServerStartError
from sglang_fair.tiny_cpu import TinyLlamaSpec, write_tiny_model

# Shapes served with random weights: the tiny CPU model, and Llama-3.1-8B's (the model of the
# simulator's H100 profile), its context cut to 8,192 tokens so the KV pool sizing stays quick.
SHAPES = {
    "tiny": TinyLlamaSpec(),
    "llama-3.1-8b": TinyLlamaSpec(hidden_size=4096, intermediate_size=14336, num_attention_heads=32,
                                  num_key_value_heads=8, head_dim=128, num_hidden_layers=32, vocab_size=128256,
                                  max_position_embeddings=8192),
}
# (name, policy, extra server arguments)
SYSTEMS = (
    ("dlpm-overlap", "dlpm", ()),
    ("dlpm-normal", "dlpm", ("--disable-overlap-schedule",)),
    ("stock-lpm", "lpm", ()),
)
EXIT_PASS, EXIT_FAIL, EXIT_CANNOT_RUN = 0, 1, 2
# Programs per second per client: every program arrives within a second or so, so the server is
# saturated and throughput measures the scheduler, not the arrival rate.
BURST_RATE = 50.0


@dataclass
class RunResult:
    system: str
    requests: int
    failed: int
    throughput: float  # the run's service per second (summary.json ``overall.throughput.service_per_s``)
    audit_violated: bool
    audit_checked: bool  # False: the run could not be audited (the stock scheduler has no bound)
    audit_error: str = ""


@dataclass
class Verdict:
    passed: bool
    reasons: list[str] = field(default_factory=list)
    runs: list[RunResult] = field(default_factory=list)


def judge(runs: list[RunResult], min_ratio: float) -> Verdict:
    """The verdict on the three runs of one check."""
    verdict = Verdict(True, runs=runs)
    by_name = {r.system: r for r in runs}
    stock = by_name.get("stock-lpm")
    for run in runs:
        if run.requests == 0:
            verdict.reasons.append(f"{run.system}: no request was sent")
        if run.failed:
            verdict.reasons.append(f"{run.system}: {run.failed} of {run.requests} requests failed")
        if run.audit_violated:
            verdict.reasons.append(f"{run.system}: the audit found a service gap beyond the fairness bound")
        if run.system != "stock-lpm" and not run.audit_checked:
            verdict.reasons.append(f"{run.system}: could not be audited: {run.audit_error}")
    for run in runs:
        if run.system == "stock-lpm":
            continue
        if stock is None or stock.throughput <= 0:
            verdict.reasons.append("no stock throughput to compare with")
            break
        ratio = run.throughput / stock.throughput
        if ratio < min_ratio:
            verdict.reasons.append(f"{run.system}: throughput {ratio:.2f}x the stock scheduler's (< {min_ratio})")
    verdict.passed = not verdict.reasons
    return verdict


def _server_args(device: str) -> list[str]:
    if device == "cuda":
        return ["--dtype", "bfloat16", "--enable-metrics"]
    return ["--enable-metrics"]


def run_system(name: str, policy: str, extra: tuple[str, ...], model_dir: Path, args: argparse.Namespace) -> RunResult:
    out = Path(args.out) / name
    server = LocalServer(model_path=model_dir, device=args.device, module="sglang_fair.launch_server",
                         extra_args=["--policy", policy, *_server_args(args.device), *extra],
                         max_total_tokens=args.max_total_tokens, startup_timeout_s=args.startup_timeout)
    out.mkdir(parents=True, exist_ok=True)
    with server, open(out.parent / f"{name}.log", "w") as log, contextlib.redirect_stdout(log):
        code = bench_main(["run", "--workload", "chat", "--scenario", args.scenario, "--backend", server.base_url,
                           "--policy", policy, "--out", str(out), "--num-programs", str(args.programs),
                           "--set", f"rate={BURST_RATE}", "--no-progress"])
    if code not in (0, 1):
        raise RuntimeError(f"{name}: the replay stopped with exit code {code} (its report: {out.parent / name}.log)")
    summary = json.loads((out / "summary.json").read_text())["overall"]
    try:
        violated, checked, why = audit_run(out).violated, True, ""
    except AuditError as error:  # the stock scheduler has no bound; for DLPM this is a failure, named
        violated, checked, why = False, False, str(error)
    return RunResult(name, int(summary["requests"]), int(summary["requests_failed"]) + int(summary["requests_throttled"]),
                     float(summary["throughput"]["service_per_s"]), bool(violated), checked, why)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--shape", choices=sorted(SHAPES), default=None,
                    help="model shape served with random weights (default: llama-3.1-8b on cuda, tiny on cpu)")
    ap.add_argument("--scenario", default="s1_fast", help="chat scenario replayed (configs/chat_<name>.yaml)")
    ap.add_argument("--programs", type=int, default=None, help="programs per client (default: the scenario's)")
    ap.add_argument("--max-total-tokens", type=int, default=None,
                    help="KV pool in tokens (default: 8192 on cpu, 200000 on cuda)")
    ap.add_argument("--min-throughput-ratio", type=float, default=0.9)
    ap.add_argument("--startup-timeout", type=float, default=900.0, help="seconds for a server to become healthy")
    ap.add_argument("--out", default="runs/gpu-check", help="directory for the runs and verdict.json")
    args = ap.parse_args(argv)
    args.shape = args.shape or ("llama-3.1-8b" if args.device == "cuda" else "tiny")
    args.max_total_tokens = args.max_total_tokens or (200_000 if args.device == "cuda" else 8192)
    if args.programs is not None and args.programs < 1:
        ap.error("--programs must be >= 1")
    if args.device == "cuda" and not _cuda_available():
        print("gpu check: CANNOT RUN: --device cuda but torch sees no CUDA device "
              "(run with --device cpu --shape tiny to check the logic on CPU)", file=sys.stderr)
        return EXIT_CANNOT_RUN
    if args.programs is None:
        args.programs = 24 if args.device == "cuda" else 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model_dir = write_tiny_model(out / f"model-{args.shape}", SHAPES[args.shape])
    runs = []
    for name, policy, extra in SYSTEMS:
        try:
            run = run_system(name, policy, extra, model_dir, args)
        except (ServerStartError, RuntimeError) as error:
            print(f"gpu check: CANNOT RUN: {name}: {error}", file=sys.stderr)
            return EXIT_CANNOT_RUN
        runs.append(run)
        print(f"{run.system:>13}: {run.requests} requests, {run.failed} failed, throughput {run.throughput:.1f}/s, "
              f"audit {'-' if not run.audit_checked else 'VIOLATED' if run.audit_violated else 'ok'}", flush=True)
    verdict = judge(runs, args.min_throughput_ratio)
    (out / "verdict.json").write_text(json.dumps(asdict(verdict) | {"device": args.device, "shape": args.shape},
                                                 indent=2) + "\n")
    print(f"gpu check ({args.device}, {args.shape}): {'PASS' if verdict.passed else 'FAIL'}"
          + "".join(f"\n  - {reason}" for reason in verdict.reasons))
    return EXIT_PASS if verdict.passed else EXIT_FAIL


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


if __name__ == "__main__":
    sys.exit(main())
