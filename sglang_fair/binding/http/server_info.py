"""``/server_info`` under ``--dp`` with our routers: the router's method, options and live workers.

Hooks (``binding/hooks.py``):

* ``describe_router`` AFTER ``sglang.srt.utils.common.build_server_info``: a
  ``fair_router`` section, ``{"method", "options", "workers"}``, with the
  options the router runs with and which workers are alive
  (``common/worker_status.py``). SGLang's ``launch_command`` joins the
  arguments without quoting, so a JSON ``--fair-router-options`` cannot be
  read back from it.
* SGLang 0.5.21 builds the answer in the route function itself:
  ``describe_router_on_route`` BEFORE ``http_server.launch_server`` adds the
  section there (``http/routes.py``).
"""

from __future__ import annotations

from sglang_fair.binding.common.router_channels import FAIR_METHODS
from sglang_fair.binding.common.settings import RouterSettings
from sglang_fair.binding.common.worker_status import read_workers
from sglang_fair.binding.http import routes


def describe_router(info: dict, server_args, *args, **kwargs) -> dict:
    """AFTER ``build_server_info``: add the router's method and options (what a benchmark
    records to compute the run's fairness bound)."""
    method = getattr(server_args, "load_balance_method", None)
    if method in FAIR_METHODS and int(getattr(server_args, "dp_size", 1) or 1) > 1:
        info["fair_router"] = {"method": method, "options": RouterSettings.load(method).options}
        workers = read_workers()
        if workers is not None:
            info["fair_router"]["workers"] = workers
    return info


def describe_router_on_route(server_args, *args, **kwargs) -> None:
    from sglang.srt.entrypoints import http_server

    routes.wrap_route(http_server.app, "/server_info", after=lambda info: describe_router(info, server_args))
