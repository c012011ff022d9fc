"""First come, first served: the arrival order, no fairness."""

from sglang_fair.core.policies.base import Policy


class FCFSPolicy(Policy):
    name = "fcfs"
