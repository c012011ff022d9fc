"""The local Ray cluster helper: it comes up with logical GPUs and leaves nothing behind."""

from __future__ import annotations

import os

import psutil
import pytest

pytest.importorskip("ray")

from sglang_fair.testing.ray_cluster import (  # noqa: E402
    WORKER_NICENESS,
    LocalRayCluster,
    lower_session_priority,
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


@pytest.mark.skipif(not os.path.exists("/proc/self/autogroup"), reason="the kernel has no autogroup scheduling")
def test_the_cluster_session_yields_the_cpu_like_its_workers() -> None:
    with open("/proc/self/autogroup") as mine:
        before = mine.read().split()[-1]
    with LocalRayCluster(num_gpus=2) as cluster:
        raylet = next(p for p in _ray_processes_of(cluster._proc.pid) if p.name() == "raylet")
        # Every process of the head's session shares its autogroup, started after the change or not.
        with open(f"/proc/{raylet.pid}/autogroup") as autogroup:
            assert autogroup.read().split()[-2:] == ["nice", str(WORKER_NICENESS)]
    with open("/proc/self/autogroup") as mine:
        assert mine.read().split()[-1] == before, "this session's priority is left alone"


def test_a_missing_process_is_reported_not_raised() -> None:
    assert lower_session_priority(2**22 + 1, WORKER_NICENESS) is False
