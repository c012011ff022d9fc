"""Where the data-parallel router's sockets listen: the workers' report channel and their KV event publishers.

On loopback unless ``SGLANG_FAIR_ROUTER_HOST`` names an address the workers
can reach (Ray actors on other nodes). Chosen at launch (``http/router_options.py``),
or before Ray starts its actors (``ray/backend.py``), bound by the controller
(``controller/router_sockets.py``).
"""

from __future__ import annotations

import os
import sys
import uuid

from sglang_fair.binding.common import settings
from sglang_fair.binding.common.settings import RouterSettings, exported_router
from sglang_fair.ports import free_port_run
from sglang_fair.router import ROUTERS

# Names SGLang already has keep SGLang's implementation.
STOCK_METHODS = ("round_robin",)
FAIR_METHODS = tuple(name for name in ROUTERS if name not in STOCK_METHODS)
LOOPBACK = "127.0.0.1"


def router_host() -> str:
    return settings.router_host(LOOPBACK)


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
    # Those workers' environment is fixed now too: tell them whether to report admissions and progress.
    router = ROUTERS.get(config.method)
    settings.export_late_binding(router is not None and router.holds_requests)
    return config.feedback


def kv_ports(host: str, count: int) -> int:
    """First of the ``count`` KV event ports: $SGLANG_FAIR_ROUTER_KV_PORT if set, else free ones."""
    fixed = settings.fixed_kv_port()
    return free_port_run(host, count) if fixed is None else fixed
