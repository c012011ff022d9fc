"""Scheduling policies by name. Each one serves every backend."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from sglang_fair.core.policies.base import Policy, ThrottleDecision
from sglang_fair.core.policies.dlpm import DLPMPolicy
from sglang_fair.core.policies.fairserve import FairServePolicy
from sglang_fair.core.policies.fcfs import FCFSPolicy
from sglang_fair.core.policies.justitia import JustitiaPolicy
from sglang_fair.core.policies.lpm import LPMPolicy
from sglang_fair.core.policies.vtc import VTCPolicy

POLICIES: dict[str, type[Policy]] = {
    cls.name: cls for cls in (FCFSPolicy, LPMPolicy, VTCPolicy, DLPMPolicy, FairServePolicy, JustitiaPolicy)
}


def make_policy(options, activity: Mapping, clock: Callable[[], float] = time.monotonic) -> Policy:
    """Instantiate the policy named by ``options.policy``."""
    return POLICIES[options.policy](options, activity, clock)


__all__ = ["POLICIES", "Policy", "ThrottleDecision", "make_policy"]
