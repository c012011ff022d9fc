"""Scheduling policies by name. Each one serves every backend."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import replace

from sglang_fair.core.errors import OptionError
from sglang_fair.core.options import FairOptions

from sglang_fair.core.policies.base import Policy
from sglang_fair.core.policies.dlpm import DLPMPolicy
from sglang_fair.core.policies.fairserve import FairServePolicy
from sglang_fair.core.policies.fcfs import FCFSPolicy
from sglang_fair.core.policies.justitia import JustitiaPolicy
from sglang_fair.core.policies.lpm import LPMPolicy
from sglang_fair.core.policies.vtc import VTCPolicy
from sglang_fair.core.policy_config import load_policy_config

POLICIES: dict[str, type[Policy]] = {
    cls.name: cls for cls in (FCFSPolicy, LPMPolicy, VTCPolicy, DLPMPolicy, FairServePolicy, JustitiaPolicy)
}


def check_policy_name(name: str) -> str:
    """``name`` if a policy has it, else ``OptionError`` listing the policies."""
    if name not in POLICIES:
        raise OptionError(f"--fair-policy/--policy: unknown policy {name!r}; choose one of {', '.join(sorted(POLICIES))}")
    return name


def make_policy(options: FairOptions, activity: Mapping, clock: Callable[[], float] = time.monotonic) -> Policy:
    """Instantiate the policy named by ``options.policy``."""
    return POLICIES[check_policy_name(options.policy)](options, activity, clock)


# Policies with settings of their own, each in the section of the policy config named after it.
CONFIG_SECTIONS = (FairServePolicy.name, JustitiaPolicy.name)


def check_policy_config(options: FairOptions) -> None:
    """Read and check ``--fair-policy-config`` whatever policy runs: a missing file,
    an unknown section or a bad setting in any section is an error naming the
    file, not something found (or never found) when another policy is chosen."""
    raw, where = load_policy_config(options.policy_config)
    unknown = sorted(set(raw) - set(CONFIG_SECTIONS))
    if unknown:
        raise OptionError(f"{where}: unknown sections {unknown}; known: {list(CONFIG_SECTIONS)}")
    for section in raw:
        make_policy(replace(options, policy=section), {})


__all__ = ["CONFIG_SECTIONS", "POLICIES", "Policy", "check_policy_config", "check_policy_name", "make_policy"]
