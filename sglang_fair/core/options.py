"""Validated configuration shared by every backend (SGLang binding, simulator).

Bad values are refused here, with the option's user-facing name in the message,
so that a server never starts with a meaningless setting.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from sglang_fair.core import checks
from sglang_fair.core.clients import is_client_id, normalize_client_id
from sglang_fair.core.costs import COSTS
from sglang_fair.core.errors import OptionError
from sglang_fair.core.throttle import check_request_limit

# Defaults: w_in/w_e = 1 and w_out/w_q = 2 as in both papers.
DEFAULT_QUANTUM = 2048.0
DEFAULT_IDLE_TIMEOUT_S = 600.0
# Latency isolation when no option says: on for DLPM workers behind the cluster-wide DLPM router
# (the default of --policy dlpm --dp N), where the router's newcomer reservation and the workers'
# preemption keep a light tenant's latency near idle beside a flood (docs/latency_isolation.md);
# off for one worker and behind the paper's D²LPM router, as the papers state them.
ISOLATED_BY_DEFAULT = (("dlpm", "d2lpm_global"),)


def default_isolation(policy: str, num_workers: int, router: str | None) -> bool:
    """Whether latency isolation is on for ``policy`` over ``num_workers`` workers behind ``router``
    unless an option sets it."""
    return num_workers >= 2 and (policy, router) in ISOLATED_BY_DEFAULT


@dataclass
class FairOptions:
    """Everything a fair policy needs; ``validate()`` is called on construction.

    ``cost`` None means the policy's own default (prefix-aware for dlpm, linear
    for the others).
    """

    policy: str = "dlpm"
    quantum: float = DEFAULT_QUANTUM  # Q^u of DLPM, in service units
    input_weight: float = 1.0  # w_in (VTC) / w_e (DLPM)
    output_weight: float = 2.0  # w_out (VTC) / w_q (DLPM)
    cost: str | None = None
    client_weights: dict[str, float] = field(default_factory=dict)
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    # Policy-specific settings (fairserve, justitia): a YAML file path or the
    # parsed mapping; each policy reads its own section and validates it.
    policy_config: str | dict | None = None
    # Latency isolation (core/isolation.py): a waiting client may preempt running
    # requests of clients holding more slots; each request at most max_preemptions times.
    isolation: bool = False
    max_preemptions: int = 1

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        # The policy's name is checked where policies are built (core/policies: check_policy_name),
        # so that options stay a leaf the policies may import.
        if not isinstance(self.policy, str):
            raise OptionError(f"--fair-policy/--policy must be a policy name, got {self.policy!r}")
        checks.positive_number("--fair-quantum", self.quantum)
        checks.non_negative_number("--fair-input-weight", self.input_weight)
        checks.non_negative_number("--fair-output-weight", self.output_weight)
        if self.input_weight == 0 and self.output_weight == 0:
            raise OptionError("--fair-input-weight and --fair-output-weight cannot both be 0")
        if self.cost is not None and self.cost not in COSTS:
            raise OptionError(
                f"--fair-cost: unknown cost function {self.cost!r}; choose one of {', '.join(COSTS)}"
            )
        checks.positive_number("--fair-idle-timeout", self.idle_timeout_s)
        checks.boolean("--fair-isolation", self.isolation)
        checks.int_at_least("--fair-max-preemptions", self.max_preemptions, 1)
        if self.policy_config is not None and not isinstance(self.policy_config, (str, dict)):
            raise OptionError(
                f"--fair-policy-config must be a YAML file path or a mapping, got {type(self.policy_config).__name__}"
            )
        clean: dict[str, float] = {}
        for raw, weight in self.client_weights.items():
            checks.positive_number(f"--fair-client-weights ({raw})", weight)
            clean[normalize_client_id(raw)] = float(weight)
        self.client_weights = clean

    def weight_of(self, client: str) -> float:
        return self.client_weights.get(client, 1.0)


RUNTIME_SETTINGS = ("quantum", "client_weights", "throttle")
THROTTLE_SETTINGS = ("overload_kv_usage", "user_limit", "user_limits")  # FairServe's limits


@dataclass(frozen=True)
class SettingsUpdate:
    """A change of settings while the server runs (``FairScheduler.update_settings``).

    ``client_weights`` is merged into the current weights: clients not named
    keep theirs; weight 1 is the default and ``None`` (JSON ``null``) removes a
    client's weight, back to it. Ids must be ids as charged (``core.clients``):
    one the identity rule would rewrite (empty, odd characters) is refused, not
    hashed into a client nobody named. ``throttle`` changes FairServe's
    limits (``THROTTLE_SETTINGS``; ``user_limits`` merged like the weights,
    ``user_limit`` None = no limit).
    """

    quantum: float | None = None
    client_weights: dict[str, float | None] = field(default_factory=dict)  # None: back to the default
    throttle: dict = field(default_factory=dict)

    @classmethod
    def parse(cls, body: object) -> SettingsUpdate:
        """From a decoded JSON body; ``OptionError`` names the bad field."""
        if not isinstance(body, dict) or not body:
            raise OptionError(f"fair settings: expected a JSON object with any of {', '.join(RUNTIME_SETTINGS)}")
        unknown = sorted(set(body) - set(RUNTIME_SETTINGS))
        if unknown:
            raise OptionError(f"fair settings: {', '.join(map(repr, unknown))} cannot be changed at run time; "
                              f"only {', '.join(RUNTIME_SETTINGS)} can")
        quantum = body.get("quantum")
        if quantum is not None:
            checks.positive_number("quantum", quantum)
        weights = body.get("client_weights", {})
        if not isinstance(weights, dict):
            raise OptionError("client_weights must be an object of client id -> weight")
        invalid = [raw for raw in weights if not is_client_id(raw.strip())]
        if invalid:
            raise OptionError(f"client_weights: invalid client id(s) {', '.join(map(repr, invalid))}: an id is 1-64 "
                              "characters of A-Z a-z 0-9 . _ @ - (or a ~hash id as the metrics show it)")
        clean: dict[str, float | None] = {}
        for raw, weight in weights.items():
            if weight is not None:
                checks.positive_number(f"client_weights[{raw!r}]", weight)
            clean[raw.strip()] = None if weight is None else float(weight)
        return cls(None if quantum is None else float(quantum), clean, _throttle(body.get("throttle", {})))

    def as_json(self) -> dict:
        out: dict = {"client_weights": dict(self.client_weights), "throttle": dict(self.throttle)}
        if self.quantum is not None:
            out["quantum"] = self.quantum
        return out


def _throttle(body: object) -> dict:
    if not isinstance(body, dict):
        raise OptionError(f"throttle must be an object with {', '.join(THROTTLE_SETTINGS)}")
    unknown = sorted(set(body) - set(THROTTLE_SETTINGS))
    if unknown:
        raise OptionError(f"throttle: {', '.join(map(repr, unknown))} cannot be changed at run time; "
                          f"only {', '.join(THROTTLE_SETTINGS)} can")
    out = dict(body)
    if "overload_kv_usage" in out:
        out["overload_kv_usage"] = checks.share("throttle.overload_kv_usage", out["overload_kv_usage"])
    if "user_limit" in out and out["user_limit"] is not None:
        check_request_limit("throttle.user_limit", out["user_limit"])
    limits = out.get("user_limits", {})
    if not isinstance(limits, dict):
        raise OptionError("throttle.user_limits must be an object of client id -> requests per window")
    for raw, limit in limits.items():
        check_request_limit(f"throttle.user_limits[{raw!r}]", limit)
    if "user_limits" in out:
        out["user_limits"] = {normalize_client_id(raw): limit for raw, limit in limits.items()}
    return out


def parse_client_weights(text: str | None) -> dict[str, float]:
    """Parse ``"alice=2,bob=0.5"`` into a dict, naming the bad entry on error."""
    weights: dict[str, float] = {}
    if not text:
        return weights
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise OptionError(f"--fair-client-weights: expected CLIENT=WEIGHT, got {item!r}")
        try:
            weights[name.strip()] = float(value)
        except ValueError:
            raise OptionError(f"--fair-client-weights: weight of {name.strip()!r} is not a number: {value!r}") from None
    return weights


def json_object(text: str, name: str) -> dict:
    """Parse ``text`` as a JSON object; the error names ``name`` (an option or variable)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OptionError(f"{name} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise OptionError(f"{name} must be a JSON object")
    return value

