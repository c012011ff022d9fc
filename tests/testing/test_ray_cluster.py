"""The local Ray cluster helper: it comes up with logical GPUs and leaves nothing behind."""

from __future__ import annotations

import psutil
import pytest

pytest.importorskip("ray")

from sglang_fair.testing.ray_cluster import LocalRayCluster  # noqa: E402


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
