"""What the workers are set to that a router must agree with, or may use: one place from each backend.

The server (``binding/http/router_options.py``) and the simulator
(``sim/cluster.py``) describe their workers with one ``WorkerSettings``;
``with_worker_settings`` (``merge``) adds each setting to the router's options under the
option name the router takes for it (``ROUTER_OPTION``), unless the options
set it already. A router that charges tokens (D²LPM) must price them as the
workers' policy does: an option contradicting ``--fair-input-weight`` or
``--fair-output-weight`` is an error naming both.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from sglang_fair.router.base import Router

# WorkerSettings field -> the router option that receives it (the weights are checked, not defaulted).
ROUTER_OPTION = {
    "quantum": "quantum",  # only for routers whose quantum is the cluster's Q^u (follows_policy_quantum)
    "client_weights": "client_weights",
    "isolation": "reserve_for_newcomers",
    "max_running_requests": "worker_max_running",
    "mixed_chunk_tokens": "worker_chunk_tokens",
    "kv_pool_tokens": "worker_kv_tokens",
    "max_prefill_tokens": "worker_batched_tokens",
    "idle_timeout_s": "idle_timeout_s",
}
_WEIGHT_FLAGS = {"input_weight": "--fair-input-weight", "output_weight": "--fair-output-weight"}


@dataclass(frozen=True)
class WorkerSettings:
    """None (or empty, or False): not set on the workers, the router keeps its own default."""

    input_weight: float = 1.0  # --fair-input-weight
    output_weight: float = 2.0  # --fair-output-weight
    quantum: float | None = None  # --fair-quantum
    client_weights: dict[str, float] = field(default_factory=dict)  # --fair-client-weights
    isolation: bool = False  # --fair-isolation
    max_running_requests: int | None = None  # --max-running-requests
    mixed_chunk_tokens: int | None = None  # --chunked-prefill-size, when --enable-mixed-chunk
    kv_pool_tokens: int | None = None  # --max-total-tokens
    max_prefill_tokens: int | None = None  # --max-prefill-tokens
    idle_timeout_s: float | None = None  # --fair-idle-timeout


def merge(cls: type[Router], options: dict, workers: WorkerSettings) -> dict:
    """``options`` plus each of ``workers``' settings the router class ``cls`` takes an option for."""
    accepted = cls.option_defaults()
    merged = dict(options)
    for key, flag in _WEIGHT_FLAGS.items():
        if key not in accepted:
            continue
        value = getattr(workers, key)
        given = merged.get(key, value)
        if not isinstance(given, (int, float)) or isinstance(given, bool) or float(given) != float(value):
            raise ValueError(f"router option {key}={given!r} contradicts {flag} {value}: the router charges "
                             f"with the workers' weights, so set {flag} alone")
        merged[key] = float(value)
    for f in fields(WorkerSettings):
        option = ROUTER_OPTION.get(f.name)
        value = getattr(workers, f.name)
        if option is None or option not in accepted or value is None or value is False or value == {}:
            continue
        if f.name == "quantum" and not cls.follows_policy_quantum:
            continue
        if f.name == "mixed_chunk_tokens" and value <= 0:
            continue
        merged.setdefault(option, dict(value) if isinstance(value, dict) else value)
    return merged
