"""The hooks that put the routers of ``sglang_fair.router`` inside SGLang's data-parallel controller.

Its hooks (listed in ``binding/hooks.py``, registered by the plugin entry
point in every SGLang process) make ``--load-balance-method d2lpm`` (or ``per_client_round_robin``,
``shortest_queue``, ``preble``, ``cache_aware``) work on stock
``python -m sglang.launch_server --dp N``, with the process backend or Ray's
(``--use-ray``, see ``ray/backend.py``). ``round_robin`` stays SGLang's own. The
command line is ``http/router_options.py``'s, the workers' reports
``scheduler/router_reports.py``'s; this module holds only the hooks of the
controller side, whose work is ``controller_binding.RouterBinding``'s:

* AROUND ``LoadBalanceMethod.from_str``: our names resolve to ``ROUND_ROBIN``
  so the stock controller initialises; its dispatch is then replaced.
* AROUND ``DataParallelController.__init__``: before the schedulers start,
  bind the completion side channel (a PULL socket whose address the
  schedulers find in their settings) and one KV event SUB
  socket per rank (bound where the publishers connect, or connected to the
  publishers the user configured); after, attach the binding's managers.
* AROUND ``DataParallelController.event_loop``: our loop (``event_loop``)
  polls the tokenizer, the side channel and the KV event sockets together
  (no busy loop), watches the workers, warns about workers that stop reporting.
* SGLang 0.5.21's controller process does not load plugins, so none of the
  above would apply in it: AROUND ``Engine._launch_scheduler_processes``,
  ``controller_process_loads_plugins`` has the launch spawn
  ``run_controller_with_plugins`` (which loads them, then runs SGLang's
  ``run_data_parallel_controller_process``) for the duration of the launch.
"""

from __future__ import annotations

import logging

from sglang_fair.binding.common import sglang_private
from sglang_fair.binding.common.attached_state import attach, attached
from sglang_fair.binding.common.router_channels import FAIR_METHODS
from sglang_fair.binding.common.sglang_fields import data_parallel
from sglang_fair.binding.controller.controller_binding import RouterBinding

logger = logging.getLogger(__name__)


def controller_process_loads_plugins(original, cls, *args, **kwargs):
    """SGLang 0.5.21: its launch spawns the name ``engine.run_data_parallel_controller_process``
    (pickled by reference); for this launch that name is ours."""
    with sglang_private.controller_process_entry(run_controller_with_plugins):
        return original(cls, *args, **kwargs)


def run_controller_with_plugins(*args, **kwargs) -> None:
    """The data-parallel controller process's entry point on SGLang 0.5.21."""
    from sglang.srt.managers import data_parallel_controller
    from sglang.srt.plugins import load_plugins

    load_plugins()
    data_parallel_controller.run_data_parallel_controller_process(*args, **kwargs)


def resolve_method(original, cls, method: str):
    """AROUND ``LoadBalanceMethod.from_str``: our names resolve to ``ROUND_ROBIN`` so the stock
    controller initialises; ``init_controller`` then replaces its dispatch."""
    if isinstance(method, str) and method.lower() in FAIR_METHODS:
        return cls.ROUND_ROBIN  # placeholder: the controller binding swaps the dispatch
    return original(cls, method)


def init_controller(original, controller, server_args, port_args, *args, **kwargs):
    """AROUND ``DataParallelController.__init__``: the router's sockets before, its managers after."""
    from sglang.srt.runtime_context import get_parallel

    parallel = get_parallel()
    method = parallel.load_balance_method
    if method not in FAIR_METHODS:
        return original(controller, server_args, port_args, *args, **kwargs)
    ranks, dp_attention = data_parallel(parallel)
    if dp_attention:
        raise ValueError(f"--load-balance-method {method} needs plain data parallelism, not DP attention")
    binding = RouterBinding.create(method, ranks, server_args)
    try:
        original(controller, server_args, port_args, *args, **kwargs)
    except BaseException:
        binding.close()
        raise
    binding.attach(controller, port_args)
    attach(controller, binding)
    logger.info("sglang-fair: data-parallel routing with %s over %d workers", method, ranks)


def run_event_loop(original, controller, *args, **kwargs):
    """AROUND ``DataParallelController.event_loop``: ours where a router of ours was attached."""
    binding = attached(controller, RouterBinding)
    if binding is None:
        return original(controller, *args, **kwargs)
    return binding.serve()
