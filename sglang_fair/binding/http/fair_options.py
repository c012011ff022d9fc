"""Command-line surface: the fairness options on SGLang's own argument parser.

Hooks (both via ``plugin.register``):
* ``extend_cli`` runs AFTER ``sglang.srt.server_args.ServerArgs.add_cli_args``:
  adds our policies to ``--schedule-policy``'s choices and the ``--fair-*``
  options, so stock ``python -m sglang.launch_server`` accepts them.
* ``capture_options`` runs AFTER ``ServerArgs.from_cli_args``: validates the
  ``--fair-*`` values (refusing bad ones with a message naming the option)
  and exports them to the processes SGLang spawns (see ``settings``).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

from sglang_fair.binding.common import settings
from sglang_fair.binding.common.settings import fair_policy_names, max_metrics_clients
from sglang_fair.binding.http import client_keys
from sglang_fair.core.options import (
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_QUANTUM,
    FairOptions,
    OptionError,
    default_isolation,
    parse_client_weights,
)
from sglang_fair.core.policies import POLICIES, check_policy_config, make_policy


def add_fair_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("sglang-fair", "Fair scheduling (DLPM, VTC, ...), from the sglang-fair plugin")
    group.add_argument("--fair-quantum", type=float, default=DEFAULT_QUANTUM,
                       help="DLPM quantum Q^u: service refilled to each client per round (default %(default)s).")
    group.add_argument("--fair-input-weight", type=float, default=1.0,
                       help="Price of one input token: w_in (VTC) / w_e of an extend token (DLPM). Default 1.")
    group.add_argument("--fair-output-weight", type=float, default=2.0,
                       help="Price of one output token: w_out (VTC) / w_q (DLPM). Default 2.")
    group.add_argument("--fair-cost", type=str, default=None,
                       help="Cost function (linear, prefix-aware, ...); default: the policy's own.")
    group.add_argument("--fair-client-weights", type=str, default=None,
                       help="Per-client share multipliers, e.g. 'alice=2,bob=0.5' (default 1).")
    group.add_argument("--fair-idle-timeout", type=float, default=DEFAULT_IDLE_TIMEOUT_S,
                       help="Seconds after which an idle client's state is dropped (default %(default)s).")
    group.add_argument("--fair-policy-config", type=str, default=None,
                       help="YAML file with FairServe / Justitia settings (see docs/fairserve_justitia.md).")
    group.add_argument("--fair-isolation", action=argparse.BooleanOptionalAction, default=None,
                       help="Latency isolation: when the batch is full, a waiting client may preempt running "
                            "requests of clients holding more slots, a light client's running requests decode "
                            "at least once per chunk of a flooding client's prefill, and a --dp router keeps "
                            "room for clients with nothing running (docs/latency_isolation.md). Default: on for "
                            "--schedule-policy dlpm over --dp 2 or more workers behind d2lpm_global (the "
                            "default router), off otherwise.")
    group.add_argument("--fair-max-preemptions", type=int, default=1,
                       help="With --fair-isolation: times one request may be preempted (default %(default)s).")
    group.add_argument("--fair-client-keys", type=str, default=None,
                       help="YAML file mapping client ids to API keys: every request must then carry one "
                            "(Authorization: Bearer KEY) and is charged to its client (docs/configuration.md).")


def extend_cli(result, parser: argparse.ArgumentParser, *args, **kwargs):
    """AFTER ``ServerArgs.add_cli_args(parser)``."""
    for action in parser._actions:
        if "--schedule-policy" in action.option_strings and action.choices is not None:
            action.choices = list(action.choices) + [p for p in fair_policy_names() if p not in action.choices]
    if not any("--fair-quantum" in a.option_strings for a in parser._actions):
        add_fair_arguments(parser)
    return result


def options_from_namespace(args: argparse.Namespace, policy: str) -> FairOptions:
    return FairOptions(
        policy=policy,
        quantum=args.fair_quantum,
        input_weight=args.fair_input_weight,
        output_weight=args.fair_output_weight,
        cost=args.fair_cost,
        client_weights=parse_client_weights(args.fair_client_weights),
        idle_timeout_s=args.fair_idle_timeout,
        policy_config=args.fair_policy_config,
        isolation=isolation_on(args, policy),
        max_preemptions=args.fair_max_preemptions,
    )


def isolation_on(args: argparse.Namespace, policy: str) -> bool:
    """``--fair-isolation`` / ``--no-fair-isolation`` as given, else the default for the policy and
    ``--dp`` and ``--load-balance-method`` (``core/options.py``: ``default_isolation``)."""
    given = getattr(args, "fair_isolation", None)
    if given is not None:
        return bool(given)
    return default_isolation(policy, getattr(args, "dp_size", 1) or 1, getattr(args, "load_balance_method", None))


def _builtin_policies() -> bool:
    from sglang.srt.managers import schedule_policy

    return bool(getattr(schedule_policy, "SGLANG_FAIR_BUILTIN", False))


def _check_isolation_supported(policy: str) -> None:
    if policy not in fair_policy_names():
        raise OptionError(f"--fair-isolation works with the policies of sglang-fair "
                          f"({', '.join(fair_policy_names())}), not --schedule-policy {policy}")
    if _builtin_policies():
        raise OptionError("--fair-isolation is not carried by the patches/ series this SGLang was built with; "
                          "use the sglang-fair plugin on a stock SGLang")


# SGLang modes whose scheduling sglang-fair does not make fair: (option, how it shows in the parsed
# arguments, why). Each is refused at start when a policy or router of ours would run with it.
UNFAIR_MODES = (
    ("--disaggregation-mode", lambda a: getattr(a, "disaggregation_mode", "null") not in (None, "null"),
     "the decode side admits the requests it receives in its own prebuilt-batch path "
     "(Scheduler._get_new_prebuilt_batch, first come first served), past sglang-fair's admission"),
    ("--enable-pdmux", lambda a: bool(getattr(a, "enable_pdmux", False)),
     "prefill and decode run as separate streams with their own admission"),
    ("--speculative-algorithm", lambda a: getattr(a, "speculative_algorithm", None) is not None,
     "speculative decoding changes the batch size SGLang runs (--max-running-requests) and verifies several "
     "tokens per step; sglang-fair's admission and output charging are not built or tested for it"),
    ("--pp-size", lambda a: (getattr(a, "pp_size", 1) or 1) > 1,
     "pipeline parallelism runs its own event loop (micro-batches in flight), which sglang-fair's "
     "admission and charging hooks are not built or tested for"),
)


def refuse_unfair_modes(args: argparse.Namespace, policy: str, router: str | None) -> None:
    """``OptionError`` naming the option when a mode of ``UNFAIR_MODES`` is on while one of our
    policies (``policy``) or routers (``router``) would run: it would be unfair without a word."""
    from sglang_fair.binding.common.router_channels import FAIR_METHODS

    ours = [f"--schedule-policy {policy}"] if policy in fair_policy_names() else []
    if router in FAIR_METHODS:
        ours.append(f"--load-balance-method {router}")
    if not ours:
        return
    for option, is_on, why in UNFAIR_MODES:
        if is_on(args):
            raise OptionError(f"{option} cannot be combined with {' and '.join(ours)}: {why}. "
                              f"Run without {option}, or with SGLang's own policies and routers")


def checked_options(args: argparse.Namespace, policy: str, api_key: str | None = None) -> FairOptions:
    """The ``--fair-*`` values as ``FairOptions``, every one checked (files read, policy sections
    parsed); ``ValueError`` naming the option otherwise. The launcher calls it before SGLang's
    imports, ``capture_options`` again inside SGLang."""
    refuse_unfair_modes(args, getattr(args, "schedule_policy", policy) or policy,
                        getattr(args, "load_balance_method", None))
    options = options_from_namespace(args, policy)
    make_policy(options, {})
    check_policy_config(options)  # every section of --fair-policy-config fails here, not in a worker
    max_metrics_clients()  # SGLANG_FAIR_METRICS_MAX_CLIENTS fails here, not in a worker
    if args.fair_client_keys:
        if api_key:
            raise OptionError("--fair-client-keys gives each client its own key; it cannot be combined "
                              "with --api-key (one key for everybody)")
        client_keys.load_keys(args.fair_client_keys)
    return options


def capture_options(server_args, cls, args: argparse.Namespace, *rest, **kwargs):
    """AFTER ``ServerArgs.from_cli_args(args)``: validate and export."""
    if not hasattr(args, "fair_quantum"):
        return server_args
    policy = server_args.schedule_policy if server_args.schedule_policy in POLICIES else "fcfs"
    try:
        options = checked_options(args, policy, getattr(server_args, "api_key", None))
        if options.isolation and args.fair_isolation is None and _builtin_policies():
            options = dataclasses.replace(options, isolation=False)  # a default the patches/ build cannot carry
        elif options.isolation:
            _check_isolation_supported(server_args.schedule_policy)
        if args.fair_client_keys:
            client_keys.export(args.fair_client_keys)
    except ValueError as exc:  # OptionError, and the key file's and metrics cap's errors
        sys.exit(f"sglang-fair: error: {exc}")
    settings.export_worker(options)
    return server_args
