"""Metrics computed from RequestRecords only (see docs/metrics.md)."""

from sglang_fair.metrics.fairness import jain_index
from sglang_fair.metrics.service import ServiceWeights
from sglang_fair.metrics.summary import SCHEMA_VERSION, summarize, timeline

__all__ = ["SCHEMA_VERSION", "ServiceWeights", "jain_index", "summarize", "timeline"]
