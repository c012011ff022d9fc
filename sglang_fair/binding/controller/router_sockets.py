"""The data-parallel controller's extra sockets: the workers' report channel and their KV events.

Bound before the schedulers start (``router_binding.init_controller``), so each
scheduler finds the report channel's address in ``SGLANG_FAIR_ROUTER_FEEDBACK``
and each rank's KV event publisher has a subscriber waiting.
"""

from __future__ import annotations

import json
import logging

import zmq

from sglang_fair.binding.common import settings
from sglang_fair.binding.common.router_channels import feedback_endpoint, router_host
from sglang_fair.binding.common.settings import RouterSettings

logger = logging.getLogger(__name__)


def open_feedback(context: zmq.Context, config: RouterSettings) -> zmq.Socket:
    """The PULL socket the workers report to; its address is exported for the schedulers spawned next."""
    feedback = context.socket(zmq.PULL)
    # Fixed in advance when the workers' environment was set before now (Ray).
    endpoint = config.feedback or feedback_endpoint()
    feedback.bind(endpoint)
    settings.export_feedback(endpoint)
    return feedback


def open_kv_events(context: zmq.Context, config: RouterSettings, server_args, num_workers: int) -> list[zmq.Socket]:
    """One SUB socket per rank: bound where our publishers connect, or following the user's own."""
    if config.kv_port is not None:
        return _bind_kv_sockets(context, router_host(), config.kv_port, num_workers)
    if getattr(server_args, "kv_events_config", None):
        return _subscribe_user_kv_events(context, server_args.kv_events_config, num_workers)
    logger.warning("sglang-fair router: no KV events configured; the index learns from dispatches only")
    return []


def _bind_kv_sockets(context: zmq.Context, host: str, base: int, num_workers: int) -> list[zmq.Socket]:
    """SUB sockets on ``base + rank``, where the ranks' publishers connect."""
    socks: list[zmq.Socket] = []
    try:
        for rank in range(num_workers):
            sock = context.socket(zmq.SUB)
            socks.append(sock)
            sock.setsockopt(zmq.SUBSCRIBE, b"")
            sock.setsockopt(zmq.RCVHWM, 100_000)
            sock.bind(f"tcp://{host}:{base + rank}")
    except zmq.ZMQError as exc:
        for sock in socks:
            sock.close(linger=0)
        raise RuntimeError(f"sglang-fair router: cannot bind KV event port {base + len(socks) - 1}: {exc}") from None
    return socks


def _subscribe_user_kv_events(context: zmq.Context, config_json: str, num_workers: int) -> list[zmq.Socket]:
    """Follow KV events the user already configured (tcp publishers that bind)."""
    try:
        config = json.loads(config_json)
    except json.JSONDecodeError:
        config = {}
    endpoint = str(config.get("endpoint", ""))
    if config.get("publisher") != "zmq" or not endpoint.startswith("tcp://") or config.get("bind") is False:
        logger.warning("sglang-fair router: cannot follow --kv-events-config %s; routing without eviction feedback",
                       config_json)
        return []
    host, _, port = endpoint[len("tcp://"):].rpartition(":")
    if host in ("*", "0.0.0.0", "::", "[::]"):
        host = "127.0.0.1"
    socks = []
    for rank in range(num_workers):
        sock = context.socket(zmq.SUB)
        sock.setsockopt(zmq.SUBSCRIBE, str(config.get("topic", "")).encode())
        sock.connect(f"tcp://{host}:{int(port) + rank}")
        socks.append(sock)
    return socks
