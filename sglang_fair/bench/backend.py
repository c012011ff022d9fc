"""The backend interface: something that replays a Workload and returns records.

Every call of the workload ends as exactly one RequestRecord, ok or error;
``partial`` says the run stopped early or some calls failed. ``backends.py``
turns ``--backend`` into one.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from sglang_fair.runs.records import RunResult
from sglang_fair.workloads.model import Workload


@runtime_checkable
class Backend(Protocol):
    def run(self, workload: Workload, progress: bool = True) -> RunResult: ...


class BackendError(ValueError):
    """A backend spec that cannot be turned into a backend."""


API_CHOICES = ("generate", "openai")
