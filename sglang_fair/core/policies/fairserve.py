"""FairServe (FairServe paper §4, Algorithm 1): WSC scheduling + OIT throttling.

Weighted Service Counter. A user's counter grows by the tokens it is served,
normalized by what a call of its application at that interaction stage
normally needs (Eq. 2-3):

    u_i += E_i * (alpha*L_I + beta*L_S + gamma*L_O) / w_aj,
    w_aj = alpha*N_I^aj + beta*N_S^aj + gamma*N_O^aj

so a call that uses exactly its application's expected tokens costs E_i
whatever the application. Input and system tokens are charged at admission,
output tokens as they are generated (the sum is Eq. 3; charging as we go keeps
the counter current for long generations, as VTC does). E_i = 1 / client
weight (``--fair-client-weights``). The counter lift for a client that
(re)joins the queue is VTC's (Algorithm 1, lines 12-18), inherited from
``VTCPolicy``. Selection (lines 31-38): queued calls that continue an
interaction already in progress go first, each tier in VTC order (least
counter, then earliest request).

Overload and Interaction-driven Throttling. Every arrival is counted against
per-user and per-(user, application) limits over a sliding window; the limits
are applied only when the KV cache is overloaded (usage >= ``overload_kv_usage``)
and never to a call of an interaction that already has an accepted call.
Interactions are keyed by (client, interaction id); one is forgotten after
``interaction_idle_s`` with no live call, and one that reaches
``max_interaction_calls`` calls no longer shields its calls, so a client cannot
escape its limits by reusing one interaction id forever.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from sglang_fair.core.apps import ProfileBook, normalize_app_id
from sglang_fair.core.clients import normalize_client_id
from sglang_fair.core.costs import Charge
from sglang_fair.core.errors import OptionError
from sglang_fair.core.throttle import ThrottleDecision
from sglang_fair.core.policies.vtc import VTCPolicy
from sglang_fair.core.policy_config import number, policy_section
from sglang_fair.core.requests import RequestState, TrackedRequest
from sglang_fair.core.throttle import RequestLimiter

_KEYS = {
    "alpha", "beta", "gamma", "overload_kv_usage", "window_s", "user_limit", "user_limits",
    "app_limit", "interaction_idle_s", "max_interaction_calls", "learn_profiles", "default_profile", "apps",
}


@dataclass(slots=True)
class _Interaction:
    first_seq: int  # arrival order of its first accepted call
    calls: int = 0
    live: int = 0  # calls queued or running
    last_active: float = 0.0


class FairServePolicy(VTCPolicy):
    name = "fairserve"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        body, where = policy_section(self.options, "fairserve", _KEYS)
        # Paper defaults (§4.3): alpha=1, beta=2, gamma=1.
        self.alpha = number(body, "alpha", 1.0, where)
        self.beta = number(body, "beta", 2.0, where)
        self.gamma = number(body, "gamma", 1.0, where)
        self.overload_kv_usage = number(body, "overload_kv_usage", 0.9, where)
        if self.overload_kv_usage > 1:
            raise OptionError(f"{where}: overload_kv_usage is a fraction of the KV cache, got {self.overload_kv_usage}")
        self.interaction_idle_s = number(body, "interaction_idle_s", 60.0, where, strict=True)
        self.max_interaction_calls = int(number(body, "max_interaction_calls", 64, where, minimum=1))
        try:
            self.profiles = ProfileBook.from_config(
                body.get("apps"), body.get("default_profile"), learn=bool(body.get("learn_profiles", True))
            )
            app_limits = {
                normalize_app_id(app): spec["limit"]
                for app, spec in (body.get("apps") or {}).items()
                if spec.get("limit") is not None
            }
            self.limiter = RequestLimiter(
                window_s=number(body, "window_s", 60.0, where, strict=True),
                user_limit=body.get("user_limit"),
                user_limits={normalize_client_id(k): v for k, v in (body.get("user_limits") or {}).items()},
                app_limit=body.get("app_limit"),
                app_limits=app_limits,
            )
        except ValueError as exc:
            raise OptionError(f"{where}: fairserve: {exc}") from None
        if self.alpha == self.beta == self.gamma == 0:
            raise OptionError(f"{where}: alpha, beta and gamma cannot all be 0")
        self.interactions: dict[tuple[str, str], _Interaction] = {}
        self.throttled = 0  # requests refused so far (metrics)
        self._last_sweep = self.clock()

    # -- weighted service ---------------------------------------------------
    def service(self, req: TrackedRequest, charge: Charge) -> float:
        """Eq. 3 for the tokens of ``charge`` (input includes ``req``'s system prompt): FairServe
        prices tokens by kind against its profile, not by the cost function, then applies the weight."""
        system = min(req.system_len, charge.input_tokens)
        used = self.alpha * (charge.input_tokens - system) + self.beta * system + self.gamma * charge.output_tokens
        expected = self.profiles.expected(req.app, req.stage).weighted(self.alpha, self.beta, self.gamma)
        priority = 1.0 / charge.weight
        return priority * used / expected if expected > 0 else priority * used

    def charge_request(self, req: TrackedRequest, charge: Charge) -> None:
        self.charge(req.client, self.service(req, charge))

    # -- interactions -------------------------------------------------------
    def _interaction(self, client: str, interaction: str | None) -> _Interaction | None:
        """The live interaction state that shields calls, or None."""
        if interaction is None:
            return None
        state = self.interactions.get((client, interaction))
        if state is None or state.calls >= self.max_interaction_calls:
            return None
        if state.live == 0 and self.clock() - state.last_active > self.interaction_idle_s:
            return None
        return state

    def continues_interaction(self, req: TrackedRequest) -> bool:
        state = self._interaction(req.client, req.interaction)
        return state is not None and state.first_seq < req.seq

    def on_request(self, req: TrackedRequest) -> None:
        self._sweep()
        if req.interaction is None:
            return
        key = (req.client, req.interaction)
        state = self._interaction(req.client, req.interaction)
        if state is None:  # new, expired or exhausted: this call starts a fresh one
            state = self.interactions[key] = _Interaction(first_seq=req.seq)
        state.calls += 1
        state.live += 1
        state.last_active = self.clock()

    def on_finish(self, req: TrackedRequest) -> None:
        if req.state is RequestState.RUNNING and req.output_charged > 0:
            prompt = req.input_len - req.system_len
            self.profiles.observe(req.app, req.stage, prompt, req.system_len, req.output_charged)
        if req.interaction is not None:
            state = self.interactions.get((req.client, req.interaction))
            if state is not None and state.live > 0:
                state.live -= 1
                state.last_active = self.clock()

    def _sweep(self) -> None:
        # Drop expired interactions at most once per idle period: O(1) amortized.
        now = self.clock()
        if now - self._last_sweep < self.interaction_idle_s:
            return
        self._last_sweep = now
        horizon = now - self.interaction_idle_s
        for key in [k for k, s in self.interactions.items() if s.live == 0 and s.last_active < horizon]:
            del self.interactions[key]

    # -- throttling (OIT) ---------------------------------------------------
    def should_throttle(
        self, client: str, app: str | None, interaction: str | None, kv_usage: float
    ) -> ThrottleDecision | None:
        now = self.clock()
        self.limiter.record(client, app, now)
        if kv_usage < self.overload_kv_usage or self._interaction(client, interaction) is not None:
            return None
        decision = self.limiter.exceeded(client, app, now)
        if decision is not None:
            self.throttled += 1
        return decision

    def throttle_settings(self) -> dict | None:
        return {"overload_kv_usage": self.overload_kv_usage, "window_s": self.limiter.window_s,
                "user_limit": self.limiter.user_limit, "user_limits": dict(self.limiter.user_limits)}

    def update_throttle(self, changes: dict) -> None:
        self.overload_kv_usage = changes.get("overload_kv_usage", self.overload_kv_usage)
        self.limiter.user_limit = changes.get("user_limit", self.limiter.user_limit)
        self.limiter.user_limits = {**self.limiter.user_limits, **changes.get("user_limits", {})}

    def forget(self, client: str) -> None:
        super().forget(client)
        self.limiter.forget(client)
        for key in [k for k in self.interactions if k[0] == client]:
            del self.interactions[key]

    # -- selection ----------------------------------------------------------
    def walk(self, ordered: list[TrackedRequest]) -> Iterator[TrackedRequest]:
        continuing, fresh = [], []
        for req in ordered:
            (continuing if self.continues_interaction(req) else fresh).append(req)
        yield from super().walk(continuing)
        yield from super().walk(fresh)
