"""Longest prefix match (SGLang's LPM): most cached prefix first, no fairness."""

from __future__ import annotations

from sglang_fair.core.policies.base import Policy, longest_prefix_first
from sglang_fair.core.requests import TrackedRequest


class LPMPolicy(Policy):
    name = "lpm"
    cache_aware = True

    def order(self, queue: list[TrackedRequest]) -> list[TrackedRequest]:
        return sorted(queue, key=longest_prefix_first)
