"""SGLang's Ray backend (``--use-ray``) with the fair policies and routers.

Under ``--use-ray`` SGLang 0.5.23 runs each scheduler as a Ray actor
(``sglang.srt.ray.scheduler_actor.SchedulerActor``) instead of a process it
spawns, and the data-parallel controller as a thread of the HTTP server.
Four gaps between the two backends are closed here:

* Actors run in Ray worker processes that never call ``load_plugins()``, and
  that get the Ray cluster's environment, not the launching shell's.
  ``join_ray`` (BEFORE ``RayEngine._launch_scheduler_processes``, the first Ray
  call) starts or joins Ray with a runtime env whose
  ``worker_process_setup_hook`` (``worker_setup``) loads the plugins in every
  worker, and whose ``env_vars`` carry the launcher's ``SGLANG_*`` settings:
  the fair policy's options, the router's configuration and the address of
  its completion side channel (fixed here, before any actor exists).
* ``launch_on_unpublished_copy`` (AROUND
  ``RayEngine._launch_dp_scheduler_processes``): the pinned release declares
  ``dist_init_addr`` on the server args the HTTP server process has already
  published, which raises "declared on the published config" for every
  ``--dp`` > 1. The launch gets a copy, so the declaration reaches the
  controller and its actors as intended.
* ``one_cpu_monitor_per_process`` (AROUND ``start_cpu_monitor_thread``): with
  ``--enable-metrics`` the controller and the tokenizer manager, now in one
  process, both register SGLang's process CPU counter, and the second
  registration raises (prometheus_client's duplicate check), so stock
  ``--use-ray --dp N --enable-metrics`` does not start. The process is
  already monitored, under the controller's label; the second is skipped.
* BEFORE ``sglang.srt.ray.http_server.launch_server``: the handler that keeps
  ``Retry-After`` on HTTP 429, as for the process backend's HTTP server.

SGLang places one actor per GPU. On a CPU-only machine give Ray logical GPUs
(``ray start --head --num-gpus 2``); ``worker_setup`` then makes
``torch.cuda.set_device`` a no-op on a torch built without CUDA, where
SGLang's actor would otherwise fail calling it.
"""

from __future__ import annotations

import copy
import logging

from sglang_fair.binding.common import settings, sglang_private
from sglang_fair.binding.common.router_channels import FAIR_METHODS, LOOPBACK, reserve_feedback_endpoint, router_host
from sglang_fair.binding.common.sglang_fields import data_parallel

logger = logging.getLogger(__name__)

SETUP_HOOK = f"{__name__}.worker_setup"


def worker_setup() -> None:
    """Ray's ``worker_process_setup_hook``: what SGLang's own processes do at start."""
    import torch
    from sglang.srt.plugins import load_plugins

    if not torch.backends.cuda.is_built():
        torch.cuda.set_device = _no_device  # a CPU build can only raise here
    load_plugins()


def _no_device(device) -> None:
    return None


def worker_runtime_env(load_balance_method: str | None = None) -> dict:
    """The runtime env SGLang's scheduler actors need; pass it to ``ray.init`` if you start Ray yourself."""
    feedback = reserve_feedback_endpoint(load_balance_method)
    env = settings.worker_environment()
    if feedback:
        env[settings.FEEDBACK_ENV] = feedback
    return {"worker_process_setup_hook": SETUP_HOOK, "env_vars": env}


def join_ray(cls, server_args, *args, placement_group=None, **kwargs):
    """BEFORE ``RayEngine._launch_scheduler_processes``: Ray, with our workers' setup, and enough GPUs."""
    import ray
    from sglang.srt.runtime_context import get_parallel

    if not ray.is_initialized():
        # Joins $RAY_ADDRESS, or starts a local cluster.
        ray.init(runtime_env=worker_runtime_env(get_parallel().load_balance_method))
    else:
        current = ray.get_runtime_context().runtime_env or {}
        if current.get("worker_process_setup_hook") != SETUP_HOOK:
            message = (
                "sglang-fair: Ray was started without sglang-fair's worker setup, so the scheduler actors "
                "will not load the plugin; start it with "
                "ray.init(runtime_env=sglang_fair.binding.ray.backend.worker_runtime_env(<load_balance_method>))"
            )
            if _fair_features_configured(get_parallel().load_balance_method):
                raise RuntimeError(message)
            logger.warning(message)
    try:
        nodes = [node for node in ray.nodes() if node.get("Alive")]
        if placement_group is None and ray.util.get_current_placement_group() is None:
            _check_gpus(ray.cluster_resources().get("GPU", 0))
            _check_placement([node.get("Resources", {}).get("GPU", 0) for node in nodes])
        _check_router_reachable(len(nodes), get_parallel().load_balance_method)
    except RuntimeError as exc:
        # Logged here: SGLang then kills this process tree, the traceback is lost.
        logger.error("%s", exc)
        ray.shutdown()  # before SGLang kills a local cluster's processes under Ray's feet
        raise
    return None


def _check_router_reachable(alive_nodes: int, load_balance_method: str | None) -> None:
    """Actors on other nodes report to the router and publish KV events to it: refuse a router
    that listens on loopback (the default) when the Ray cluster has more than one node."""
    if alive_nodes <= 1 or (settings.exported_router() is None and load_balance_method not in FAIR_METHODS):
        return
    if router_host() == LOOPBACK:
        raise RuntimeError(
            f"sglang-fair: the Ray cluster has {alive_nodes} nodes, but the router's report channel and KV event "
            f"sockets listen on {LOOPBACK}, which actors on the other nodes cannot reach; set "
            f"{settings.HOST_ENV} to this node's address as the other nodes reach it (docs/router.md, "
            f"'Several nodes')"
        )


def _check_placement(node_gpus: list[float]) -> None:
    """SGLang asks Ray for ``--nnodes`` bundles of dp x tp x pp / nnodes GPUs, each on one node (one
    node for all of them when nnodes is 1), and waits until they are placed: refuse what no node
    layout of this cluster can hold, which would wait forever."""
    from sglang.srt.runtime_context import get_parallel

    parallel = get_parallel()
    dp_ranks, dp_attention = data_parallel(parallel)
    needed = (1 if dp_attention else dp_ranks) * parallel.tp_size * parallel.pp_size
    nnodes = max(1, int(getattr(parallel, "nnodes", 1) or 1))
    problem = placement_problem(node_gpus, needed, nnodes)
    if problem:
        raise RuntimeError(f"sglang-fair: --use-ray: {problem}")


def placement_problem(node_gpus: list[float], needed: int, nnodes: int) -> str | None:
    """Why ``nnodes`` bundles of ``needed // nnodes`` GPUs cannot be placed on nodes with
    ``node_gpus`` GPUs each (a bundle on one node), or None."""
    per_bundle = needed // nnodes
    if per_bundle <= 0:
        return None
    fits = sum(int(gpus // per_bundle) for gpus in node_gpus)
    if fits >= nnodes:
        return None
    largest = max(node_gpus, default=0)
    layout = ", ".join(f"{gpus:g}" for gpus in sorted(node_gpus, reverse=True)) or "none"
    hint = ""
    if nnodes == 1 and len(node_gpus) > 1:
        spread = next((k for k in range(2, len(node_gpus) + 1)
                       if needed % k == 0 and sum(int(g // (needed // k)) for g in node_gpus) >= k), None)
        if spread is not None:
            hint = f"; pass --nnodes {spread} to spread them over {spread} nodes"
    return (f"SGLang places the {needed} GPUs of dp x tp x pp in {nnodes} bundle(s) of {per_bundle} GPUs, each "
            f"on one node (--nnodes {nnodes}), and the cluster's nodes have {layout} GPUs (largest {largest:g}): "
            f"Ray would wait for good{hint}")


def _fair_features_configured(load_balance_method: str | None) -> bool:
    return settings.configured() or load_balance_method in FAIR_METHODS


def _check_gpus(available: float) -> None:
    """SGLang's placement group would wait forever for GPUs the cluster lacks; say so instead."""
    from sglang.srt.runtime_context import get_parallel

    parallel = get_parallel()
    dp_ranks, dp_attention = data_parallel(parallel)
    needed = (1 if dp_attention else dp_ranks) * parallel.tp_size * parallel.pp_size
    if available < needed:
        raise RuntimeError(
            f"sglang-fair: --use-ray needs {needed} GPUs in the Ray cluster (one actor per dp x tp x pp rank), "
            f"it has {available:g}. On a CPU-only machine give Ray logical GPUs: ray start --head --num-gpus {needed}"
        )


def launch_on_unpublished_copy(original, cls, server_args, *args, **kwargs):
    """AROUND ``RayEngine._launch_dp_scheduler_processes``: see the module docstring."""
    from sglang.srt.runtime_context import get_context

    try:
        published = get_context().server_args
    except ValueError:
        published = None
    if published is server_args:
        server_args = copy.copy(server_args)
        sglang_private.unshare_resolved_overrides(server_args)  # declarations land on the copy only
    return original(cls, server_args, *args, **kwargs)


def one_cpu_monitor_per_process(original, component: str, *args, **kwargs):
    """AROUND ``start_cpu_monitor_thread``: see the module docstring."""
    try:
        return original(component, *args, **kwargs)
    except ValueError as exc:
        if "Duplicated timeseries" not in str(exc):
            raise
        logger.info("sglang-fair: the %s shares this process's CPU monitor (Ray backend)", component)
        return None
