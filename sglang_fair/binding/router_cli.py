"""The data-parallel routers on SGLang's command line (launcher side).

Hooks (listed in ``binding/hooks.py``):

* AFTER ``ServerArgs.add_cli_args``: the methods join ``--load-balance-method``'s
  choices; ``--fair-router-quantum`` (Q^w) and ``--fair-router-options`` (JSON
  of any router option) are added.
* BEFORE ``ServerArgs.from_cli_args``: the router is built once to validate
  the options (bad ones stop the launch with a message), KV events are turned
  on unless the user configured them (publishers connect to ports the
  controller binds), and the configuration is exported for the controller
  (``settings.RouterSettings``).
* AROUND ``LoadBalanceMethod.from_str``: our names resolve to ``ROUND_ROBIN``
  so the stock controller initialises; its dispatch is then replaced.
* AFTER ``sglang.srt.utils.common.build_server_info`` (``/server_info``): a
  ``fair_router`` section, ``{"method", "options", "workers"}``, with the
  options the router runs with and which workers are alive
  (``router_health``). SGLang's ``launch_command`` joins the arguments without
  quoting, so a JSON ``--fair-router-options`` cannot be read back from it.
  SGLang 0.5.21 builds the answer in the route function itself:
  ``describe_router_on_route`` BEFORE ``http_server.launch_server`` adds the
  section there (``binding/http_routes.py``).

The router's sockets (KV events, completion reports) listen on loopback unless
``SGLANG_FAIR_ROUTER_HOST`` names an address the workers can reach (Ray
actors on other nodes).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid

from sglang_fair.binding import http_routes, router_health
from sglang_fair.binding.settings import RouterSettings, exported_router
from sglang_fair.core.options import json_object, parse_client_weights
from sglang_fair.ports import free_port_run
from sglang_fair.router import ROUTERS, make_router, with_policy_settings

# Names SGLang already has keep SGLang's implementation.
STOCK_METHODS = ("round_robin",)
FAIR_METHODS = tuple(name for name in ROUTERS if name not in STOCK_METHODS)
KV_PORT_ENV = "SGLANG_FAIR_ROUTER_KV_PORT"  # first of N consecutive ports; default: random free range
HOST_ENV = "SGLANG_FAIR_ROUTER_HOST"
LOOPBACK = "127.0.0.1"


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
                  client_weights: dict[str, float] | None = None, isolation: bool = False) -> RouterSettings:
    """The router configuration from the CLI values; raises ValueError naming the bad option.

    A router that charges tokens (D²LPM) takes the policy's weights
    (``--fair-input-weight``/``--fair-output-weight``), as the workers do;
    ``d2lpm_global`` also takes ``--fair-quantum`` unless ``--fair-router-quantum``
    or the options set its quantum, ``--fair-client-weights``, ``--max-running-requests`` when set,
    and with ``--fair-isolation`` keeps a local-queue place for newcomers.
    """
    options = json_object(options_json, "--fair-router-options") if options_json else {}
    if quantum is not None:
        options["quantum"] = quantum
    return RouterSettings(method, with_policy_settings(method, options, input_weight, output_weight, policy_quantum,
                                                       max_running_requests, client_weights, isolation))


def prepare_router_args(cls, args: argparse.Namespace, *rest, **kwargs):
    """BEFORE ``ServerArgs.from_cli_args``: validate, export, and turn on KV events.

    ServerArgs is read-only once resolved, so the KV event publishers are
    configured here, on the parsed arguments: each rank's publisher connects
    to ``<router host>:<port + rank>``, where the controller will bind.
    """
    method = getattr(args, "load_balance_method", None)
    if method not in FAIR_METHODS:
        return None
    try:
        config = router_config(method, getattr(args, "fair_router_quantum", None),
                               getattr(args, "fair_router_options", None),
                               getattr(args, "fair_input_weight", 1.0), getattr(args, "fair_output_weight", 2.0),
                               getattr(args, "fair_quantum", None), getattr(args, "max_running_requests", None),
                               parse_client_weights(getattr(args, "fair_client_weights", None)),
                               bool(getattr(args, "fair_isolation", False)))
        dp_size = max(1, int(getattr(args, "dp_size", 1) or 1))
        make_router(method, dp_size, **config.options)
        if not getattr(args, "kv_events_config", None):
            host = router_host()
            config.kv_port = _kv_ports(host, dp_size)
            args.kv_events_config = json.dumps(
                {"publisher": "zmq", "endpoint": f"tcp://{host}:{config.kv_port}", "bind": False, "topic": ""}
            )
    except (ValueError, TypeError, RuntimeError) as exc:
        sys.exit(f"sglang-fair: error: --load-balance-method {method}: {exc}")
    config.export()
    router_health.export_status_path()  # the controller reports dead workers there, /health reads it
    return None


def describe_router(info: dict, server_args, *args, **kwargs) -> dict:
    """AFTER ``build_server_info``: add the router's method and options (what a benchmark
    records to compute the run's fairness bound)."""
    method = getattr(server_args, "load_balance_method", None)
    if method in FAIR_METHODS and int(getattr(server_args, "dp_size", 1) or 1) > 1:
        info["fair_router"] = {"method": method, "options": RouterSettings.load(method).options}
        workers = router_health.read_workers()
        if workers is not None:
            info["fair_router"]["workers"] = workers
    return info


def describe_router_on_route(server_args, *args, **kwargs) -> None:
    from sglang.srt.entrypoints import http_server

    http_routes.wrap_route(http_server.app, "/server_info", after=lambda info: describe_router(info, server_args))


def resolve_method(original, cls, method: str):
    if isinstance(method, str) and method.lower() in FAIR_METHODS:
        return cls.ROUND_ROBIN  # placeholder: the controller binding swaps the dispatch
    return original(cls, method)


def router_host() -> str:
    return os.environ.get(HOST_ENV, "").strip() or LOOPBACK


def feedback_endpoint() -> str:
    """A fresh address for the completion side channel.

    On loopback an abstract IPC socket (Linux: no file left behind when the
    server is killed); on another host a TCP port the workers can reach.
    """
    host = router_host()
    if host != LOOPBACK:
        return f"tcp://{host}:{free_port_run(host, 1)}"
    name = f"sglang_fair_router_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    return f"ipc://@{name}" if sys.platform == "linux" else f"ipc:///tmp/{name}"


def reserve_feedback_endpoint(method: str | None = None) -> str | None:
    """Fix the side channel's address now, in the exported configuration.

    For workers whose environment is set before the controller exists (Ray
    actors get theirs when Ray starts). ``method``: the load-balance method,
    for launches that did not go through the command line (the Python API),
    which then run the router with its defaults. None when no fair router is
    configured.
    """
    config = exported_router()
    if config is None:
        if method not in FAIR_METHODS:
            return None
        config = RouterSettings(method)
    if config.feedback is None:
        config.feedback = feedback_endpoint()
        config.export()
    from sglang_fair.binding import router_feedback  # needs zmq, which the bench's use of this module does not

    # Those workers' environment is fixed now too: tell them whether to report admissions and progress.
    router = ROUTERS.get(config.method)
    router_feedback.export_late_binding(router is not None and router.holds_requests)
    return config.feedback


def _kv_ports(host: str, count: int) -> int:
    """First of the ``count`` KV event ports: $SGLANG_FAIR_ROUTER_KV_PORT if set, else free ones."""
    fixed = os.environ.get(KV_PORT_ENV)
    if not fixed:
        return free_port_run(host, count)
    try:
        return int(fixed)
    except ValueError:
        raise ValueError(f"{KV_PORT_ENV} must be a port number, got {fixed!r}") from None
