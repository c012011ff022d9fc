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

from sglang_fair.core.policies import POLICIES

DEFAULT_POLICY = "dlpm"
DEFAULT_DLPM_ROUTER = "d2lpm_global"  # fair across the cluster, not only per worker (docs/router.md)


def build_argv(argv: list[str]) -> list[str]:
    """Translate our launcher's arguments into SGLang's."""
    parser = argparse.ArgumentParser(
        prog="python -m sglang_fair.launch_server",
        description="Launch SGLang with fair scheduling. Unknown arguments go to SGLang.",
        add_help=False,
    )
    parser.add_argument("--policy", default=DEFAULT_POLICY,
                        help=f"Scheduling policy: {', '.join(POLICIES)} or any SGLang policy (default {DEFAULT_POLICY}).")
    ours, rest = parser.parse_known_args(argv)
    known = [*POLICIES, *(p for p in stock_policies() if p not in POLICIES)]
    if ours.policy not in known:
        parser.error(f"--policy: unknown policy {ours.policy!r}; choose one of {', '.join(known)}")
    if any(a == "--schedule-policy" or a.startswith("--schedule-policy=") for a in rest):
        parser.error("use --policy, not --schedule-policy, with this launcher")
    out = ["--schedule-policy", ours.policy, *rest]
    if _dp_size(rest) > 1 and not any(a.startswith("--load-balance-method") for a in rest):
        router = _default_router(ours.policy)
        if router is not None:
            out += ["--load-balance-method", router]
    return out


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
    try:
        from sglang_fair.router import ROUTERS
    except ImportError:
        return None
    return DEFAULT_DLPM_ROUTER if policy == "dlpm" and DEFAULT_DLPM_ROUTER in ROUTERS else None


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if "-h" in argv or "--help" in argv:
        print(__doc__)
    sglang_argv = build_argv(argv)

    from sglang.launch_server import run_server
    from sglang.srt.plugins import load_plugins
    from sglang.srt.server_args import prepare_server_args
    from sglang.srt.utils import kill_process_tree

    load_plugins()
    server_args = prepare_server_args(sglang_argv)
    try:
        run_server(server_args)
    finally:
        kill_process_tree(os.getpid(), include_parent=False)


if __name__ == "__main__":
    main()
