"""Engine-agnostic scheduling core: cost functions, service ledger, policies.

Nothing in this package imports SGLang; the SGLang binding, the router and the
simulator all drive the same objects.
"""

from sglang_fair.core.clients import DEFAULT_CLIENT, normalize_client_id
from sglang_fair.core.costs import CostFunction, LinearCost, make_cost
from sglang_fair.core.fair_scheduler import FairScheduler
from sglang_fair.core.ledger import ClientService, ServiceLedger
from sglang_fair.core.options import FairOptions, OptionError, SettingsUpdate
from sglang_fair.core.policies import POLICIES, Policy, make_policy
from sglang_fair.core.requests import RequestState, TrackedRequest

__all__ = [
    "DEFAULT_CLIENT",
    "POLICIES",
    "ClientService",
    "CostFunction",
    "FairOptions",
    "FairScheduler",
    "LinearCost",
    "OptionError",
    "Policy",
    "RequestState",
    "ServiceLedger",
    "SettingsUpdate",
    "TrackedRequest",
    "make_cost",
    "make_policy",
    "normalize_client_id",
]
