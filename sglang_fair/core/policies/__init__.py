"""Scheduling policies by name. Each one serves every backend."""

from __future__ import annotations

from collections.abc import Mapping

from sglang_fair.core.policies.base import Policy
from sglang_fair.core.policies.dlpm import DLPMPolicy
from sglang_fair.core.policies.fcfs import FCFSPolicy
from sglang_fair.core.policies.lpm import LPMPolicy
from sglang_fair.core.policies.vtc import VTCPolicy

POLICIES: dict[str, type[Policy]] = {
    cls.name: cls for cls in (FCFSPolicy, LPMPolicy, VTCPolicy, DLPMPolicy)
}


def make_policy(options, activity: Mapping) -> Policy:
    """Instantiate the policy named by ``options.policy``."""
    return POLICIES[options.policy](options, activity)


__all__ = ["POLICIES", "Policy", "make_policy"]
