"""The local Ray cluster helper: it comes up with logical GPUs and leaves nothing behind."""

from __future__ import annotations

import os

import psutil
import pytest

pytest.importorskip("ray")

from sglang_fair.testing import ray_cluster  # noqa: E402
from sglang_fair.testing.ray_cluster import (  # noqa: E402
    WORKER_NICENESS,
    LocalRayCluster,
    lower_session_priority,
    session_autogroup,
)


def _ray_processes_of(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def test_cluster_starts_and_stops_cleanly() -> None:
    cluster = LocalRayCluster(num_gpus=2).start()
    head = cluster._proc.pid
    children = _ray_processes_of(head)
    assert children, "ray start --block runs the head's processes as its children"
    assert cluster.address.startswith("127.0.0.1:")
    cluster.stop()
    gone, alive = psutil.wait_procs(children, timeout=10)
    assert not alive, alive
    assert not psutil.pid_exists(head) or psutil.Process(head).status() == psutil.STATUS_ZOMBIE


@pytest.mark.skipif(
    session_autogroup(os.getpid()) is None,
    reason="this kernel does not group processes by session here (no autogroup, or a cgroup's task group)",
)
def test_the_cluster_session_yields_the_cpu_like_its_workers() -> None:
    before = session_autogroup(os.getpid())
    with LocalRayCluster(num_gpus=2) as cluster:
        raylet = next(p for p in _ray_processes_of(cluster._proc.pid) if p.name() == "raylet")
        # Every process of the head's session shares its autogroup, started after the change or not.
        assert session_autogroup(raylet.pid).split()[-2:] == ["nice", str(WORKER_NICENESS)]
    assert session_autogroup(os.getpid()) == before, "this session's priority is left alone"


def test_a_missing_process_is_reported_not_raised() -> None:
    assert session_autogroup(2**22 + 1) is None
    assert lower_session_priority(2**22 + 1, WORKER_NICENESS) is False


def test_a_process_outside_any_autogroup_is_left_alone(monkeypatch) -> None:
    # In a container the process sits in its cgroup's task group and the file reads empty:
    # writing a niceness there would change nothing, so nothing is written.
    written = []

    class _EmptyAutogroup:
        def __init__(self, path: str, mode: str = "r") -> None:
            self.mode = mode

        def __enter__(self):
            return self

        def __exit__(self, *exc) -> None:
            pass

        def read(self) -> str:
            return ""

        def write(self, text: str) -> None:
            written.append(text)

    monkeypatch.setattr(ray_cluster, "open", _EmptyAutogroup, raising=False)
    assert session_autogroup(os.getpid()) is None
    assert lower_session_priority(os.getpid(), WORKER_NICENESS) is False
    assert written == []
