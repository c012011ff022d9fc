"""``python -m sglang_fair.bench {run,compare,summarize,audit,paper}``.

Exit status: 0 on a complete run, 1 when the run is partial (some request
failed, the server was unreachable or went away; the results are still
written and marked ``partial``), 2 on bad input (nothing is run).
``audit``: 0 when every run is within its fairness bound, 1 when some run
exceeds it, 2 when a directory cannot be audited.
"""

from __future__ import annotations

import argparse
import contextlib
import shlex
import sys
import time
from pathlib import Path

from sglang_fair.bench.backend import API_CHOICES, BackendError
from sglang_fair.bench.backends import make_backend
from sglang_fair.bench.compare import compare_runs
from sglang_fair.bench.model_vocab import VocabularyMismatch, fit_to_model, read_model_vocab
from sglang_fair.bench.output import read_records, read_summary, write_run
from sglang_fair.bench.paper.cli import add_parser as add_paper_parser
from sglang_fair.bench.paper.cli import cmd_paper
from sglang_fair.bench.paper.registry import UnknownName
from sglang_fair.bench.report import GLOSSARY, client_table, overall_line, verdict
from sglang_fair.metrics.service import INPUT_MODES, ServiceWeights
from sglang_fair.workloads.loaders import LoaderError, load_trace
from sglang_fair.workloads.model import Program, Workload
from sglang_fair.workloads.registry import GENERATORS, make_workload
from sglang_fair.workloads.tokens import DEFAULT_VOCAB_SIZE
from sglang_fair.workloads.validate import WorkloadError, check_workload

EXIT_OK, EXIT_PARTIAL, EXIT_BAD_INPUT = 0, 1, 2
EXIT_VIOLATION = 1  # audit: some run exceeds its bound


class UsageError(Exception):
    pass


def _parse_set(items: list[str]) -> dict:
    """``--set``/``--sim-opt key=value``: the value is read as YAML (numbers, lists, booleans)."""
    import yaml

    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"expected key=value, got {item!r}")
        try:
            out[key.strip()] = yaml.safe_load(value)
        except yaml.YAMLError as e:
            raise UsageError(f"{item!r}: cannot parse the value: {e}") from e
    return out


def _weights(args) -> ServiceWeights:
    try:
        return ServiceWeights(args.w_input, args.w_output, args.input_mode)
    except ValueError as e:
        raise UsageError(str(e)) from e


def _vocab_choice(args) -> tuple[int | None, str | None]:
    """The vocabulary the user gave on the command line and how (``--vocab-size`` or
    ``--set vocab_size``), or (None, None)."""
    overrides = _parse_set(args.set)
    given = overrides.get("vocab_size")
    if "vocab_size" in overrides and args.vocab_size is not None and given != args.vocab_size:
        raise UsageError(f"--vocab-size {args.vocab_size} and --set vocab_size={given} disagree; give one")
    if args.vocab_size is not None:
        return args.vocab_size, f"--vocab-size {args.vocab_size}"
    if "vocab_size" in overrides:
        return given, f"--set vocab_size={given}"
    return None, None


def _workload(args, vocab_size: int | None = None) -> Workload:
    """The workload of the command line; ``vocab_size`` generates the scenario with that vocabulary."""
    if args.trace:
        if args.set or args.num_programs is not None:
            raise UsageError("--set and --num-programs change a scenario; a --trace is replayed as it is")
        wl = load_trace(args.trace, DEFAULT_VOCAB_SIZE if args.vocab_size is None else args.vocab_size)
    else:
        if not args.workload or not args.scenario:
            raise UsageError("give --workload and --scenario (or --trace FILE)")
        overrides = _parse_set(args.set)
        chosen, _ = _vocab_choice(args)
        if vocab_size is not None or chosen is not None:
            overrides["vocab_size"] = vocab_size if vocab_size is not None else chosen
        if args.num_programs is not None:
            if args.num_programs < 1:
                raise UsageError(f"--num-programs must be >= 1, got {args.num_programs}")
            overrides["num_programs"] = args.num_programs
        wl = make_workload(args.workload, args.scenario, overrides, args.seed)
    bad = [c for c in args.misbehaving if c not in wl.clients]
    if bad:
        raise UsageError(f"--misbehaving names unknown clients {bad}; clients are {wl.clients}")
    if args.misbehaving:
        wl.programs = [Program(p.program_id, p.client, p.arrival, p.calls, p.client not in args.misbehaving, p.kind)
                       for p in wl.programs]
    check_workload(wl)
    return wl


def _fit_to_server(args, wl: Workload, url: str) -> tuple[Workload, int | None]:
    """The workload with token ids the server's model takes (or VocabularyMismatch), before any
    request is sent; and the model's vocabulary (None: unknown)."""
    model = read_model_vocab(url)
    _, chosen = _vocab_choice(args)
    regenerate = None if args.trace else (lambda size: _workload(args, size))
    wl, notice = fit_to_model(wl, model, chosen=chosen, regenerate=regenerate)
    if notice:
        print(notice, file=sys.stderr, flush=True)
    return wl, model.size


def _launch(args):
    """A local tiny CPU server running ``--policy`` (sglang_fair.testing.server)."""
    from sglang_fair.testing.server import LocalServer

    extra = ["--policy", args.policy or "fcfs", *shlex.split(args.launch_args)]
    if "--enable-metrics" not in extra:
        extra.append("--enable-metrics")  # the server then reports admission times, which the audit needs
    # Keep the server's log with the run: its '#queue-req' lines show whether the policy had a queue to order.
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    # A server takes a minute or two to start on CPU: say so rather than sit silent.
    print(f"starting a tiny CPU server ({' '.join(extra)}); this takes 1-2 minutes, log: {out / 'server.log'}",
          file=sys.stderr, flush=True)
    return LocalServer(module="sglang_fair.launch_server", extra_args=extra, log_path=out / "server.log")


def cmd_run(args) -> int:
    weights = _weights(args)
    wl = _workload(args)
    if args.launch and args.backend:
        raise UsageError("give either --backend or --launch, not both")
    if not args.launch and not args.backend:
        raise UsageError("give --backend URL|sim or --launch")
    out = Path(args.out)
    with (_launch(args) if args.launch else contextlib.nullcontext()) as server:
        spec = server.base_url if server is not None else args.backend
        model_vocab = None
        if spec != "sim":
            wl, model_vocab = _fit_to_server(args, wl, spec)
        backend = make_backend(spec, policy=args.policy, api=args.api, timeout_s=args.timeout,
                               concurrency=args.concurrency, seed=args.seed, sim_options=_parse_set(args.sim_opt))
        print(f"replaying {wl.name}: {len(wl.programs)} programs, {wl.num_calls()} calls, "
              f"{len(wl.clients)} clients -> {spec}", file=sys.stderr)
        started = time.time()
        result = backend.run(wl, progress=not args.no_progress)
        if server is not None and server.poll() is not None:
            # Our server died (e.g. it lost a port race): the answers, if any, came from elsewhere.
            result.errors.append(f"the launched server exited with code {server.poll()} during the run; "
                                 f"log: {server.log_path}")
            result.partial = True
    run_info = {
        "workload": wl.meta.get("workload", "trace"),
        "scenario": args.scenario or args.trace,
        "scenario_name": wl.name,
        "policy": args.policy,
        "backend": "launch" if args.launch else args.backend,
        "api": args.api,
        "seed": wl.seed,
        "vocab_size": wl.meta.get("vocab_size"),
        "model_vocab_size": model_vocab,
        "started_at_unix": started,
        "command": "python -m sglang_fair.bench " + " ".join(shlex.quote(a) for a in sys.argv[1:]),
    }
    flags = wl.well_behaved_clients()
    summary = write_run(out, result, run_info, flags, weights, args.window)
    o = summary["overall"]
    print(f"wrote {out}: {o['requests_ok']}/{o['requests']} requests ok, jain={_fmt(o['jain_index'])}, "
          f"service/s={_fmt(o['throughput']['service_per_s'])}", file=sys.stderr)
    print(f"\nPer-client outcome. {GLOSSARY}\n")
    label = args.policy or "run"  # --policy is only a label for a server URL, and may be left out
    print(client_table({label: summary}))
    print(f"\n{overall_line(label, summary)}")
    print(verdict(out))
    for e in result.errors:
        print(f"error: {e}", file=sys.stderr)
    # A policy's refusal (HTTP 429) is an answer, and the calls after a refused one are never
    # sent: a run whose only failures are those is complete (throttling is what it measures).
    throttled = sum(r.throttled for r in result.records)
    failed = [r for r in result.records if not r.ok and not r.throttled
              and not (r.error or "").startswith("parent failed")]
    if result.partial and (result.errors or failed):
        print(f"run is PARTIAL: {o['requests_failed']} of {o['requests']} requests failed "
              f"(see {out / 'records.jsonl'})", file=sys.stderr)
        return EXIT_PARTIAL
    if throttled:
        unsent = o["requests_failed"] - throttled
        print(f"{throttled} requests refused by the server's policy (HTTP 429), {unsent} calls after them "
              "not sent; the run is complete", file=sys.stderr)
    return EXIT_OK


def cmd_compare(args) -> int:
    table = compare_runs([Path(d) for d in args.dirs], Path(args.out))
    print(table)
    print(f"wrote {args.out}", file=sys.stderr)
    return EXIT_OK


def cmd_summarize(args) -> int:
    """Recompute summary.json and the plots from records.jsonl (e.g. other weights)."""
    from sglang_fair.runs.records import RunResult

    run_dir = Path(args.dir)
    old = read_summary(run_dir)
    records = read_records(run_dir)
    info = dict(old.get("run", {}))
    result = RunResult(records=records, partial=bool(info.pop("partial", False)), errors=info.pop("errors", []),
                       meta=info.pop("backend_meta", {}), params=info.pop("params", {}))
    flags = {c: v["well_behaved"] for c, v in old.get("clients", {}).items()}
    write_run(run_dir, result, info, flags, _weights(args), args.window)
    print(f"rewrote {run_dir / 'summary.json'}", file=sys.stderr)
    return EXIT_OK


def cmd_audit(args) -> int:
    from sglang_fair.bench.audit import audit_run, format_table, to_json

    audits = [audit_run(Path(d)) for d in args.dirs]
    print(to_json(audits) if args.json else format_table(audits), end="" if not args.json else "\n")
    return EXIT_VIOLATION if any(a.violated for a in audits) else EXIT_OK


def _fmt(v) -> str:
    return "-" if v is None else f"{v:.3f}"


def _metric_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--w-input", type=float, default=1.0, help="service weight of an input token (default 1)")
    p.add_argument("--w-output", type=float, default=2.0, help="service weight of an output token (default 2)")
    p.add_argument("--input-mode", choices=INPUT_MODES, default="prompt",
                   help="count the whole prompt or only its uncached (extend) part as input service")
    p.add_argument("--window", type=float, default=None, help="service-rate window in seconds (default: ~50 windows)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sglang_fair.bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="replay a workload and write a run directory")
    r.add_argument("--workload", choices=sorted(GENERATORS), help="generator name")
    r.add_argument("--scenario", help="scenario name (configs/<workload>_<scenario>.yaml) or a yaml path")
    r.add_argument("--trace", help="replay a trace file (CSV/JSONL) instead of a generator")
    r.add_argument("--vocab-size", type=int, default=None,
                   help="token id vocabulary: a scenario's (as --set vocab_size=N; default: the scenario's, "
                        "cut to the model's against a server), or --trace's bound and text prompts' (default "
                        f"{DEFAULT_VOCAB_SIZE}); refused against a server whose model has fewer ids")
    r.add_argument("--policy", help="policy label for a URL backend; the policy to run for sim/--launch")
    r.add_argument("--backend", help="server URL (http://host:port) or 'sim'")
    r.add_argument("--launch", action="store_true", help="start a local tiny CPU server with --policy")
    r.add_argument("--launch-args", default="", help="extra server arguments for --launch, e.g. '--max-total-tokens 16384' "
                        "(--enable-metrics is always on: the audit needs the admission times)")
    r.add_argument("--sim-opt", action="append", default=[], metavar="KEY=VALUE",
                   help="simulator option for --backend sim (repeatable), e.g. --sim-opt num_workers=4")
    r.add_argument("--api", choices=API_CHOICES, default="generate", help="native /generate or /v1/completions")
    r.add_argument("--out", required=True, help="run directory to write")
    r.add_argument("--seed", type=int, default=None, help="override the scenario seed")
    r.add_argument("--num-programs", type=int, default=None, help="programs per client (overrides the scenario)")
    r.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a parameter of every client, or the scenario's vocab_size (repeatable), "
                        "e.g. --set thought_tokens=64")
    r.add_argument("--misbehaving", type=lambda s: [c for c in s.split(",") if c], default=[],
                   help="comma-separated clients to mark misbehaving (e.g. for a trace)")
    r.add_argument("--timeout", type=float, default=600.0, help="per-request timeout in seconds")
    r.add_argument("--concurrency", type=int, default=256, help="maximum requests in flight")
    r.add_argument("--no-progress", action="store_true", help="no progress bar")
    _metric_args(r)
    r.set_defaults(func=cmd_run)
    c = sub.add_parser("compare", help="compare run directories: a table and one plot")
    c.add_argument("dirs", nargs="+", help="run directories")
    c.add_argument("--out", default="compare.png", help="comparison plot path (default compare.png)")
    c.set_defaults(func=cmd_compare)
    s = sub.add_parser("summarize", help="recompute a run directory's summary and plots from its records")
    s.add_argument("dir")
    _metric_args(s)
    s.set_defaults(func=cmd_summarize)
    a = sub.add_parser("audit", help="check run directories against their fairness bound (exit 1 if exceeded)")
    a.add_argument("dirs", nargs="+", help="run directories")
    a.add_argument("--json", action="store_true", help="machine-readable output")
    a.set_defaults(func=cmd_audit)
    add_paper_parser(sub).set_defaults(func=cmd_paper)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (UsageError, UnknownName, WorkloadError, LoaderError, BackendError, VocabularyMismatch, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
