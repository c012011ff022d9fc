"""The data-parallel routers on SGLang's command line (parsed in the main process, before anything starts).

Hooks (listed in ``binding/hooks.py``):

* AFTER ``ServerArgs.add_cli_args``: the methods join ``--load-balance-method``'s
  choices; ``--fair-router-quantum`` (Q^w) and ``--fair-router-options`` (JSON
  of any router option) are added.
* BEFORE ``ServerArgs.from_cli_args``: the router is built once to validate
  the options (bad ones stop the launch with a message), KV events are turned
  on unless the user configured them (publishers connect to ports the
  controller binds), and the configuration is exported for the controller
  (``settings.RouterSettings``).

``/server_info`` shows what this configured (``server_info.py``); the
controller swaps the dispatch (``controller/router_binding.py``).
"""

from __future__ import annotations

import argparse
import json
import sys

from sglang_fair.binding.common import settings
from sglang_fair.binding.common.router_channels import FAIR_METHODS, kv_ports, router_host
from sglang_fair.binding.common.settings import RouterSettings
from sglang_fair.core.options import json_object, parse_client_weights
from sglang_fair.router import make_router, with_policy_settings


def extend_cli(result, parser: argparse.ArgumentParser, *args, **kwargs):
    for action in parser._actions:
        if "--load-balance-method" in action.option_strings and action.choices is not None:
            action.choices = list(action.choices) + [m for m in FAIR_METHODS if m not in action.choices]
    if not any("--fair-router-quantum" in a.option_strings for a in parser._actions):
        group = parser.add_argument_group("sglang-fair router", "Data-parallel routing (D2LPM and baselines)")
        group.add_argument("--fair-router-quantum", type=float, default=None,
                           help="D2LPM worker quantum Q^w (default: the router's own).")
        group.add_argument("--fair-router-options", type=str, default=None,
                           help='JSON object of router options, e.g. \'{"index_capacity_tokens": 2000000}\'.')
    return result


def router_config(method: str, quantum: float | None, options_json: str | None,
                  input_weight: float = 1.0, output_weight: float = 2.0,
                  policy_quantum: float | None = None, max_running_requests: int | None = None,
                  client_weights: dict[str, float] | None = None, isolation: bool = False,
                  mixed_chunk_tokens: int | None = None) -> RouterSettings:
    """The router configuration from the CLI values; raises ValueError naming the bad option.

    A router that charges tokens (D²LPM) takes the policy's weights
    (``--fair-input-weight``/``--fair-output-weight``), as the workers do;
    ``d2lpm_global`` also takes ``--fair-quantum`` unless ``--fair-router-quantum``
    or the options set its quantum, ``--fair-client-weights``, ``--max-running-requests`` when set,
    with ``--fair-isolation`` keeps a local-queue place for newcomers, and with
    ``--enable-mixed-chunk`` takes ``--chunked-prefill-size`` when set (``mixed_chunk_tokens``).
    """
    options = json_object(options_json, "--fair-router-options") if options_json else {}
    if quantum is not None:
        options["quantum"] = quantum
    return RouterSettings(method, with_policy_settings(method, options, input_weight, output_weight, policy_quantum,
                                                       max_running_requests, client_weights, isolation,
                                                       mixed_chunk_tokens))


def validated_router(args: argparse.Namespace) -> RouterSettings | None:
    """The router configuration of parsed arguments, checked by building the router once; None
    when no router of ours is asked for. ``ValueError`` (or ``TypeError``) naming the bad option."""
    method = getattr(args, "load_balance_method", None)
    if method not in FAIR_METHODS:
        return None
    config = router_config(method, getattr(args, "fair_router_quantum", None),
                           getattr(args, "fair_router_options", None),
                           getattr(args, "fair_input_weight", 1.0), getattr(args, "fair_output_weight", 2.0),
                           getattr(args, "fair_quantum", None), getattr(args, "max_running_requests", None),
                           parse_client_weights(getattr(args, "fair_client_weights", None)),
                           bool(getattr(args, "fair_isolation", False)),
                           getattr(args, "chunked_prefill_size", None) if getattr(args, "enable_mixed_chunk", False)
                           else None)
    make_router(method, _dp_size(args), **config.options)
    return config


def _dp_size(args: argparse.Namespace) -> int:
    return max(1, int(getattr(args, "dp_size", 1) or 1))


def prepare_router_args(cls, args: argparse.Namespace, *rest, **kwargs):
    """BEFORE ``ServerArgs.from_cli_args``: validate, export, and turn on KV events.

    ServerArgs is read-only once resolved, so the KV event publishers are
    configured here, on the parsed arguments: each rank's publisher connects
    to ``<router host>:<port + rank>``, where the controller will bind.
    """
    method = getattr(args, "load_balance_method", None)
    try:
        config = validated_router(args)
        if config is None:
            return None
        if not getattr(args, "kv_events_config", None):
            host = router_host()
            config.kv_port = kv_ports(host, _dp_size(args))
            args.kv_events_config = json.dumps(
                {"publisher": "zmq", "endpoint": f"tcp://{host}:{config.kv_port}", "bind": False, "topic": ""}
            )
    except (ValueError, TypeError, RuntimeError) as exc:
        sys.exit(f"sglang-fair: error: --load-balance-method {method}: {exc}")
    config.export()
    settings.export_status_path()  # the controller reports dead workers there, /health reads it
    return None
