"""Workloads: programs of LLM calls with arrival times and dependencies.

Generators (tot, qa, judge, chat, synthetic) build them from the scenario
configs under configs/ (registry.make_workload); loaders read a user's files.
"""

from sglang_fair.workloads.model import Call, Program, Workload

__all__ = ["Call", "Program", "Workload"]
