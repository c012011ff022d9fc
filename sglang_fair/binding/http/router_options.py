"""The data-parallel routers on SGLang's command line (parsed in the main process, before anything starts).

Hooks (listed in ``binding/hooks.py``):

* AFTER ``ServerArgs.add_cli_args``: the methods join ``--load-balance-method``'s
  choices; ``--fair-router-quantum`` (the router's quantum) and ``--fair-router-options`` (JSON
  of any router option) are added.
* BEFORE ``ServerArgs.from_cli_args``: the router is built once to validate
  the options (bad ones stop the launch with a message), KV events are turned
  on unless the user configured them (publishers connect to ports the
  controller binds), and the configuration is exported for the controller
  (``settings.RouterSettings``).

``/server_info`` shows what this configured (``server_info.py``); the
controller swaps the dispatch (``controller/router_binding.py``'s hooks,
``controller/dispatch.py``).
"""

from __future__ import annotations

import argparse
import json
import sys

from sglang_fair.binding.common import settings
from sglang_fair.binding.common.router_channels import FAIR_METHODS, kv_ports, router_host
from sglang_fair.binding.common.settings import RouterSettings
from sglang_fair.binding.http.fair_options import isolation_on
from sglang_fair.core.options import json_object, parse_client_weights
from sglang_fair.router import WorkerSettings, make_router, with_worker_settings


def extend_cli(result, parser: argparse.ArgumentParser, *args, **kwargs):
    for action in parser._actions:
        if "--load-balance-method" in action.option_strings and action.choices is not None:
            action.choices = list(action.choices) + [m for m in FAIR_METHODS if m not in action.choices]
    if not any("--fair-router-quantum" in a.option_strings for a in parser._actions):
        group = parser.add_argument_group("sglang-fair router", "Data-parallel routing (D2LPM and baselines)")
        group.add_argument("--fair-router-quantum", type=float, default=None,
                           help="The router's quantum. d2lpm_global (the default router of --policy dlpm "
                                "--dp N): its cluster-wide DLPM quantum Q, default --fair-quantum; d2lpm: "
                                "the worker quantum Q^w, default 10000. The other sglang-fair routers refuse "
                                "it at launch (dynamo's integer quantum goes in --fair-router-options); "
                                "SGLang's own methods ignore it.")
        group.add_argument("--fair-router-options", type=str, default=None,
                           help='JSON object of router options, e.g. \'{"index_capacity_tokens": 2000000}\'.')
    return result


def router_config(method: str, quantum: float | None, options_json: str | None,
                  workers: WorkerSettings = WorkerSettings()) -> RouterSettings:
    """The router configuration from the CLI values; raises ValueError naming the bad option.

    ``--fair-router-quantum`` sets the router's quantum; the router takes from
    ``workers`` what it must share with them (``router/worker_settings.py``):
    the policy's weights, ``--fair-quantum`` (``d2lpm_global``),
    ``--fair-client-weights``, ``--fair-isolation``, ``--fair-idle-timeout``,
    ``--max-running-requests``, ``--max-total-tokens``, ``--max-prefill-tokens``,
    and ``--chunked-prefill-size`` under ``--enable-mixed-chunk``.
    """
    options = json_object(options_json, "--fair-router-options") if options_json else {}
    if quantum is not None:
        options["quantum"] = quantum
    return RouterSettings(method, with_worker_settings(method, options, workers))


def worker_settings(args: argparse.Namespace) -> WorkerSettings:
    """The workers' settings a router may need, from parsed launch arguments (absent ones: unset)."""
    def get(name: str, default: object = None) -> object:
        return getattr(args, name, default)

    return WorkerSettings(
        input_weight=get("fair_input_weight", 1.0), output_weight=get("fair_output_weight", 2.0),
        quantum=get("fair_quantum"), client_weights=parse_client_weights(get("fair_client_weights")),
        isolation=isolation_on(args, get("schedule_policy") or "fcfs"), max_running_requests=get("max_running_requests"),
        mixed_chunk_tokens=get("chunked_prefill_size") if get("enable_mixed_chunk", False) else None,
        kv_pool_tokens=get("max_total_tokens"), max_prefill_tokens=get("max_prefill_tokens"),
        idle_timeout_s=get("fair_idle_timeout"))


def validated_router(args: argparse.Namespace) -> RouterSettings | None:
    """The router configuration of parsed arguments, checked by building the router once; None
    when no router of ours is asked for. ``ValueError`` (or ``TypeError``) naming the bad option."""
    method = getattr(args, "load_balance_method", None)
    if method not in FAIR_METHODS:
        return None
    config = router_config(method, getattr(args, "fair_router_quantum", None),
                           getattr(args, "fair_router_options", None), worker_settings(args))
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
