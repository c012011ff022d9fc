"""The fairness bounds of a run's configuration (docs/fairness.md).

Notation of the papers: ``w_e``/``w_in`` and ``w_q``/``w_out`` price an input
(extend) and an output token, ``L_input`` is the longest input, ``M`` the most
output tokens a worker's running batch can still produce (the papers take a
worker's KV pool; with the run's longest output known, also at most
max_running_requests x that output), ``Q^u`` the DLPM quantum and ``D = |W|``
the number of workers.

* VTC, one worker (VTC paper, Theorem 4.4): ``2 max(w_in L_input, w_out M)``.
* DLPM, one worker (DLPM paper, Theorem 4.1): ``2 (U + Q^u)``, ``U = w_e L_input + w_q M``.
* DLPM behind the ``d2lpm`` router (Theorem 5.1): ``2 D (U + Q^u)``.
* The ``d2lpm_global`` router (Theorem G): ``2 (Q^r + U_G)``,
  ``U_G = w_q D M_G + w_e D (B + L_input + R L_input)``, with ``Q^r``, ``B`` and
  ``R`` the router's ``quantum``, ``local_queue_tokens`` and
  ``local_queue_requests``, its token weights, and ``M_G = M + R x`` the
  longest output (a worker's batch plus its local queue).
* Anything else has no guarantee; it is held against ``2 D (U + Q^u)``, the
  D²LPM bound of the same shape, as a reference (``theorem`` is False).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field

from sglang_fair.metrics.service import ServiceWeights

GLOBAL_ROUTER = "d2lpm_global"


class BoundError(ValueError):
    """The run's parameters do not determine a bound."""


@dataclass(frozen=True)
class Bound:
    name: str
    theorem: bool  # False: a reference of D²LPM's shape for a configuration without a guarantee
    value: float
    formula: str  # the expression with its numbers
    # How service is priced for comparison with this bound: the policy's own cost.
    measure: ServiceWeights = field(default_factory=ServiceWeights)


def router_defaults(router: str) -> dict:
    """A router's option defaults, read from its constructor."""
    from sglang_fair.router import ROUTERS

    return {k: v for k, v in ROUTERS[router].option_defaults().items() if v is not inspect.Parameter.empty}


def _need(params: dict, key: str) -> object:
    value = params.get(key)
    if value is None:
        raise BoundError(f"the run's parameters lack {key} (summary.json run.params.{key} is null)")
    return value


def _input_mode(cost: str | None) -> str:
    # A linear cost charges the whole prompt, a prefix-aware one only the extend.
    return "prompt" if cost == "linear" else "extend"


def batch_output(params: dict, max_output: int | None) -> tuple[int, str]:
    """M and how it was obtained: the KV pool, or fewer when the batch size and
    the longest output bound what a batch can still produce."""
    pool = int(_need(params, "kv_pool_tokens"))  # type: ignore[arg-type]
    running = params.get("max_running_requests")
    if max_output is not None and running is not None and running * max_output < pool:
        return running * max_output, f"{running}*{max_output}"
    return pool, f"{pool}"


def bound_for(params: dict, l_input: int, max_output: int | None = None) -> Bound:
    """The bound that applies to a run with these parameters (summary.json ``run.params``),
    its longest input and, when known, its longest output."""
    if params.get("client_weights"):
        raise BoundError(f"the run gives clients unequal weights {params['client_weights']}; "
                         "the bounds compare equally weighted clients")
    policy = str(_need(params, "policy"))
    d = int(_need(params, "num_workers"))  # type: ignore[arg-type]
    m, m_how = batch_output(params, max_output)
    router = params.get("router") if d > 1 or params.get("router") == GLOBAL_ROUTER else None
    if router == GLOBAL_ROUTER:
        opts = router_defaults(GLOBAL_ROUTER) | dict(params.get("router_options") or {})
        q, b, r = float(opts["quantum"]), int(opts["local_queue_tokens"]), int(opts["local_queue_requests"])
        if opts.get("reserve_for_newcomers"):
            r += 1  # each local queue's place kept for a client with nothing dispatched
        we, wq = float(opts["input_weight"]), float(opts["output_weight"])
        # Requests in a local queue are not in the batch yet; each output fits the KV pool.
        out = max_output if max_output is not None else int(_need(params, "kv_pool_tokens"))  # type: ignore[arg-type]
        m_g = m + r * out
        u_g = wq * d * m_g + we * d * (b + l_input + r * l_input)
        return Bound("d2lpm_global Theorem G (docs/fairness.md)", True, 2 * (q + u_g),
                     f"2*(Q^r + w_q*D*(M + R*out) + w_e*D*(B + L + R*L)) = 2*({q:g} + {wq:g}*{d}*({m_how} + {r}*{out})"
                     f" + {we:g}*{d}*({b} + {l_input} + {r}*{l_input}))", ServiceWeights(we, wq, "extend"))
    we, wq = float(_need(params, "input_weight")), float(_need(params, "output_weight"))  # type: ignore[arg-type]
    measure = ServiceWeights(we, wq, _input_mode(params.get("cost")))
    if policy == "vtc" and d == 1:
        return Bound("VTC Theorem 4.4", True, 2 * max(we * l_input, wq * m),
                     f"2*max(w_in*L, w_out*M) = 2*max({we:g}*{l_input}, {wq:g}*{m_how})", measure)
    q = float(_need(params, "quantum"))  # type: ignore[arg-type]
    u = we * l_input + wq * m
    if policy == "dlpm" and d == 1:
        return Bound("DLPM Theorem 4.1", True, 2 * (u + q),
                     f"2*(w_e*L + w_q*M + Q^u) = 2*({we:g}*{l_input} + {wq:g}*{m_how} + {q:g})", measure)
    formula = f"2*D*(w_e*L + w_q*M + Q^u) = 2*{d}*({we:g}*{l_input} + {wq:g}*{m_how} + {q:g})"
    if policy == "dlpm" and router == "d2lpm":
        return Bound("D²LPM Theorem 5.1", True, 2 * d * (u + q), formula, measure)
    setup = policy if router is None else f"{policy} behind {router}"
    # Measured as D²LPM prices service, whatever cost the policy was configured with.
    return Bound(f"reference: D²LPM shape ({setup} has no bound)", False, 2 * d * (u + q), formula,
                 ServiceWeights(we, wq, "extend"))
