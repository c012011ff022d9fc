"""Workloads: programs of LLM calls with arrival times and dependencies."""

from sglang_fair.workloads.model import Call, Program, Workload

__all__ = ["Call", "Program", "Workload"]
