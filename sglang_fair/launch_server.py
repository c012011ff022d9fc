"""``python -m sglang_fair.launch_server --policy dlpm [any sglang argument]``.

The user-facing launcher: SGLang's own server with the sglang-fair plugin
active. ``--policy`` maps to SGLang's ``--schedule-policy``; every other
argument, including the ``--fair-*`` options, goes to SGLang unchanged. With
``--dp N`` (N > 1) and no ``--load-balance-method``, the data-parallel router
under ``--policy dlpm`` defaults to ``d2lpm_global`` (one cluster-wide DLPM
with late binding); the paper's ``d2lpm`` stays available as
``--load-balance-method d2lpm``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from sglang_fair.core.policies import POLICIES
from sglang_fair.tiny_cpu import CPU_ENV, CPU_OPTIONS, TINY_CPU_MAX_TOTAL_TOKENS, ensure_tiny_model

DEFAULT_POLICY = "dlpm"
DEFAULT_DLPM_ROUTER = "d2lpm_global"  # fair across the cluster, not only per worker (docs/router.md)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m sglang_fair.launch_server",
        description="Launch SGLang with fair scheduling. Every other argument goes to SGLang "
                    "(its options, including the --fair-* ones, follow).",
        add_help=False,
        allow_abbrev=False,  # a prefix of an SGLang option must reach SGLang, not match ours
    )
    group = parser.add_argument_group("sglang-fair launcher")
    group.add_argument("--policy", default=None,
                       help=f"scheduling policy: {', '.join(POLICIES)} or any SGLang policy "
                            f"(default {DEFAULT_POLICY}); --schedule-policy is accepted as an alias")
    group.add_argument("--tiny-cpu", action="store_true",
                       help="serve the bundled tiny random-weight model on this machine's CPU "
                            "(sets SGLANG_USE_CPU_ENGINE=1, SGLANG_EXTERNAL_MODEL_PACKAGE=sglang_fair.tiny_cpu_models "
                            "and the CPU flags; any of them given explicitly wins); for trying the server, not "
                            "for real outputs")
    return parser


def build_argv(argv: list[str]) -> list[str]:
    """Translate our launcher's arguments into SGLang's."""
    parser = _parser()
    ours, rest = parser.parse_known_args(argv)
    policy, rest = _take_schedule_policy(parser, ours.policy, rest)
    if policy not in POLICIES:  # SGLang's own names cost its imports: only looked up when needed
        known = [*POLICIES, *(p for p in stock_policies() if p not in POLICIES)]
        if policy not in known:
            parser.error(f"--policy: unknown policy {policy!r}; choose one of {', '.join(known)}")
    out = ["--schedule-policy", policy, *rest]
    if ours.tiny_cpu:
        out += _tiny_cpu_args(rest)
    if _dp_size(rest) > 1 and not any(a.startswith("--load-balance-method") for a in rest):
        router = _default_router(policy)
        if router is not None:
            out += ["--load-balance-method", router]
    return out


def _take_schedule_policy(parser: argparse.ArgumentParser, policy: str | None,
                          rest: list[str]) -> tuple[str, list[str]]:
    """SGLang's ``--schedule-policy X`` means ``--policy X`` here; both, disagreeing, is an error."""
    out, alias = [], None
    i = 0
    while i < len(rest):
        arg = rest[i]
        if arg == "--schedule-policy":
            if i + 1 >= len(rest):
                parser.error("--schedule-policy: expected a policy name")
            alias, i = rest[i + 1], i + 2
            continue
        if arg.startswith("--schedule-policy="):
            alias = arg.split("=", 1)[1]
        else:
            out.append(arg)
        i += 1
    if policy is not None and alias is not None and alias != policy:
        parser.error(f"--policy {policy} and --schedule-policy {alias} disagree; give one")
    return policy or alias or DEFAULT_POLICY, out


def _tiny_cpu_args(rest: list[str]) -> list[str]:
    """SGLang arguments of ``--tiny-cpu`` that ``rest`` does not already set."""
    given = {a.split("=", 1)[0] for a in rest if a.startswith("--")}
    wanted = [*CPU_OPTIONS, ("--max-total-tokens", str(TINY_CPU_MAX_TOTAL_TOKENS))]
    if "--model-path" not in given and "--model" not in given:
        wanted.insert(0, ("--model-path", str(ensure_tiny_model())))
    return [part for option in wanted if option[0] not in given for part in option]


def stock_policies() -> list[str]:
    """SGLang's own schedule policies (read from SGLang, so they never go stale)."""
    from sglang.srt.managers.schedule_policy import CacheAgnosticPolicy, CacheAwarePolicy

    return [p.value for p in (*CacheAwarePolicy, *CacheAgnosticPolicy)]


def _dp_size(args: list[str]) -> int:
    for i, arg in enumerate(args):
        for flag in ("--dp", "--dp-size", "--data-parallel-size"):
            if arg == flag and i + 1 < len(args):
                return int(args[i + 1])
            if arg.startswith(flag + "="):
                return int(arg.split("=", 1)[1])
    return 1


def _default_router(policy: str) -> str | None:
    from sglang_fair.router import ROUTERS

    return DEFAULT_DLPM_ROUTER if policy == "dlpm" and DEFAULT_DLPM_ROUTER in ROUTERS else None


def check_fair_arguments(sglang_argv: list[str]) -> None:
    """Refuse bad ``--fair-*`` and router options, config and key files in the first seconds, before
    SGLang's imports; SGLang's parser runs the same checks again (``binding/http/``)."""
    from sglang_fair.binding.http.fair_options import add_fair_arguments, checked_options
    from sglang_fair.binding.http.router_options import extend_cli, validated_router

    parser = argparse.ArgumentParser(prog="sglang_fair.launch_server", usage="%(prog)s [options]", add_help=False,
                                     allow_abbrev=False)
    add_fair_arguments(parser)
    extend_cli(None, parser)
    parser.add_argument("--schedule-policy")
    parser.add_argument("--load-balance-method")
    parser.add_argument("--dp-size", "--dp", "--data-parallel-size", type=int, default=1)
    parser.add_argument("--api-key")
    parser.add_argument("--max-running-requests", type=int)
    # Modes sglang-fair does not make fair (fair_options.UNFAIR_MODES): refused here too.
    parser.add_argument("--disaggregation-mode", default="null")
    parser.add_argument("--enable-pdmux", action="store_true")
    parser.add_argument("--speculative-algorithm")
    parser.add_argument("--pp-size", "--pipeline-parallel-size", type=int, default=1)
    args, _ = parser.parse_known_args(sglang_argv)  # a malformed value exits here, naming the option
    policy = args.schedule_policy if args.schedule_policy in POLICIES else "fcfs"
    try:
        checked_options(args, policy, args.api_key)
    except ValueError as exc:
        sys.exit(f"sglang-fair: error: {exc}")
    try:
        validated_router(args)
    except (ValueError, TypeError, RuntimeError) as exc:
        sys.exit(f"sglang-fair: error: --load-balance-method {args.load_balance_method}: {exc}")


def check_port_free(host: str, port: int) -> None:
    """Exit with a clear message if ``port`` is taken: SGLang would start every
    process, fail to bind, and then hang instead of exiting."""
    from sglang_fair.ports import port_free

    if not port_free(host, port):
        sys.exit(f"sglang_fair.launch_server: port {port} on {host} is already in use; choose another with --port")


def bind_rank_cores(ranks: int) -> None:
    """Give each rank of a multi-rank CPU server its own cores (``binding/common/cpu_threads.py``) unless
    the user set ``SGLANG_CPU_OMP_THREADS_BIND``; every process SGLang starts inherits it."""
    from sglang_fair.binding.common.cpu_threads import BIND_ENV, TooFewCores, default_bind

    try:
        bind = default_bind(ranks)
    except TooFewCores as exc:
        sys.exit(f"sglang_fair.launch_server: {exc}")
    if bind is not None:
        os.environ[BIND_ENV] = bind
        print(f"sglang_fair.launch_server: {BIND_ENV}={bind} (one group of cores per rank, "
              f"from this process's CPU affinity; set it to choose)", file=sys.stderr, flush=True)


def docs_folder() -> Path:
    """The guides: the source tree's docs/, or where the wheel installed them."""
    source = Path(__file__).resolve().parents[1] / "docs"
    return source if source.is_dir() else Path(sys.prefix) / "share" / "doc" / "sglang-fair"


def _device(args: list[str]) -> str | None:
    """The value of SGLang's ``--device`` in ``args`` (either spelling), if given."""
    for i, arg in enumerate(args):
        if arg == "--device" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--device="):
            return arg.split("=", 1)[1]
    return None


def use_cpu_standins() -> None:
    """An installed wheel on a CPU machine lacks what SGLang's CPU engine imports: bring the stand-ins."""
    from sglang_fair.cpu_standins import SITE, activate_if_missing

    absent = activate_if_missing()
    if absent:
        print(f"sglang_fair.launch_server: {', '.join(absent)} not installed; using sglang-fair's CPU "
              f"stand-ins ({SITE})", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if "-h" in argv or "--help" in argv:
        _parser().print_help()
        print(f"\nThe docs/ pages named below are in {docs_folder()}.")
        print("\nSGLang's options:\n")
    sglang_argv = build_argv(argv)
    check_fair_arguments(sglang_argv)
    if "--tiny-cpu" in argv:
        for key, value in CPU_ENV.items():  # SGLang's CPU path, and the tiny model's classes only
            os.environ.setdefault(key, value)
        os.environ["SGLANG_USE_CPU_ENGINE"] = "1"
    if _device(sglang_argv) == "cpu":  # --tiny-cpu sets it
        use_cpu_standins()

    from sglang.launch_server import run_server
    from sglang.srt.plugins import load_plugins
    from sglang.srt.server_args import prepare_server_args
    from sglang.srt.utils import kill_process_tree

    load_plugins()
    server_args = prepare_server_args(sglang_argv)
    check_port_free(server_args.host, server_args.port)
    if server_args.device == "cpu":
        bind_rank_cores(server_args.dp_size * server_args.tp_size * server_args.pp_size)
    try:
        run_server(server_args)
    finally:
        kill_process_tree(os.getpid(), include_parent=False)
    from sglang_fair.binding.common.quiet_exit import exit_without_finalizing

    exit_without_finalizing()  # after a clean stop, no leak report from Triton's extension


if __name__ == "__main__":
    main()
