"""The scheduling configuration of a live server (``run.params``), from its ``/server_info`` answer.

SGLang reports its own arguments and the KV pool size; our ``--fair-*``
options are read back from its launch command with the binding's own
parsers. The keys are ``runs/params.py``'s.
"""

from __future__ import annotations

import argparse
import shlex
from typing import Any

from sglang_fair.binding.http.fair_options import add_fair_arguments, isolation_on
from sglang_fair.binding.http.router_options import extend_cli, router_config, worker_settings
from sglang_fair.core.options import OptionError, parse_client_weights
from sglang_fair.runs.params import effective_cost, empty_params


def server_params(info: dict | None, policy_label: str | None) -> dict:
    """Parameters of a live server from its ``/server_info`` answer (None: not available).

    SGLang reports its own arguments and the KV pool size; our ``--fair-*``
    options are not SGLang fields, so they are parsed from ``launch_command``
    (options not given there have the plugin's defaults; a configuration set
    through the ``SGLANG_FAIR_CONFIG`` variable instead cannot be seen). The
    router's options come from the ``fair_router`` section the plugin adds,
    when the server has it (SGLang's ``launch_command`` loses the quoting of
    a JSON ``--fair-router-options``).
    """
    if not info:
        return empty_params("bench") | {"policy": policy_label}
    policy = _find(info, "schedule_policy") or policy_label
    dp = _find(info, "dp_size")
    num_workers = int(dp) if isinstance(dp, (int, float)) else None
    router = _find(info, "load_balance_method") if num_workers and num_workers > 1 else None
    fair = _fair_arguments(info.get("launch_command"))
    if fair is not None:  # what the defaults that depend on them (isolation) read
        fair.schedule_policy, fair.dp_size, fair.load_balance_method = policy, num_workers or 1, router
    router_options = None
    described = info.get("fair_router")
    if isinstance(described, dict) and router is not None and described.get("method") == router:
        router_options = dict(described.get("options") or {})
    elif fair is not None and router is not None:
        try:
            router_options = router_config(router, fair.fair_router_quantum, fair.fair_router_options,
                                           worker_settings(fair)).options
        except ValueError:
            router_options = None
    return {
        "policy": policy,
        "quantum": fair.fair_quantum if fair else None,
        "input_weight": fair.fair_input_weight if fair else None,
        "output_weight": fair.fair_output_weight if fair else None,
        "cost": effective_cost(policy, fair.fair_cost) if fair else None,
        "client_weights": _client_weights(fair.fair_client_weights) if fair else None,
        "router": router,
        "router_options": router_options,
        "num_workers": num_workers,
        "kv_pool_tokens": _int(_find(info, "max_total_num_tokens")),
        "max_running_requests": _int(_find(info, "max_running_requests")),
        "isolation": isolation_on(fair, policy or "fcfs") if fair else None,
        "max_preemptions": fair.fair_max_preemptions if fair else None,
        "source": "server_info",
    }


def _fair_arguments(command: Any) -> argparse.Namespace | None:
    """The ``--fair-*`` options (and ``--max-running-requests``) of a launch command; None when there is none."""
    if not isinstance(command, str) or not command.strip():
        return None
    parser = argparse.ArgumentParser(add_help=False)
    add_fair_arguments(parser)
    extend_cli(None, parser)
    parser.add_argument("--max-running-requests", type=int, default=None)  # SGLang's; d2lpm_global takes it
    try:
        ns, _ = parser.parse_known_args(shlex.split(command))
    except (SystemExit, ValueError):  # argparse exits on a malformed value
        return None
    return ns


def _client_weights(text: str | None) -> dict[str, float] | None:
    try:
        return parse_client_weights(text)
    except OptionError:
        return None


def _find(tree: Any, key: str) -> Any:
    """The first value under ``key`` anywhere in a nested dict (SGLang groups its arguments)."""
    if isinstance(tree, dict):
        if key in tree:
            return tree[key]
        for value in tree.values():
            found = _find(value, key)
            if found is not None:
                return found
    return None


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
