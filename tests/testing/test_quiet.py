"""The quiet wait after a server's start (sglang_fair/testing/quiet.py): on a fake clock and stand-in processes."""

import os
import signal
import subprocess
import sys
import time

import pytest

from sglang_fair.testing.quiet import busy_cores, wait_quiet
from tests.support.clock import FakeClock


def _stand_in_server(child_code: str) -> subprocess.Popen:
    """A process whose child runs ``child_code``, as a server's late-spawned children do."""
    leader = f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {child_code!r}]); time.sleep(60)"
    return subprocess.Popen([sys.executable, "-c", leader], start_new_session=True)


@pytest.mark.parametrize("readings, samples_taken", [
    ([1.8, 0.9, 0.2, 0.1], 3),  # handed over at the first quiet reading
    ([1.8] * 10, 4),  # never quiet: handed over at the deadline (each reading takes half a second)
])
def test_the_wait_ends_at_the_first_quiet_reading_or_at_the_deadline(readings, samples_taken):
    clock = FakeClock()
    taken = []

    def reading() -> float:
        taken.append(clock.now)
        clock.advance(0.5)
        return readings[len(taken) - 1]

    wait_quiet(2.0, reading, clock=clock)
    assert len(taken) == samples_taken


def _children_started(proc: subprocess.Popen) -> None:
    import psutil

    leader = psutil.Process(proc.pid)
    for _ in range(200):  # a second or two: the child is a fresh interpreter
        if leader.children():
            return
        time.sleep(0.01)
    raise AssertionError("the stand-in's child never started")


def test_the_busy_reading_counts_every_process_of_the_tree():
    import psutil

    sleeper = "import time; time.sleep(60)"
    spinner = "import time\nend = time.monotonic() + 60\nwhile time.monotonic() < end: pass"
    proc = _stand_in_server(sleeper)
    try:
        _children_started(proc)
        assert busy_cores(proc.pid, window_s=0.3) < 0.5
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    proc = _stand_in_server(spinner)
    try:
        _children_started(proc)
        leader = psutil.Process(proc.pid)
        leader.cpu_percent(None)
        # The spinning child, however contended the machine, against the leader, asleep since the child started.
        readings = [busy_cores(proc.pid, window_s=0.3) for _ in range(3)]
        assert leader.cpu_percent(None) / 100 < 0.05
        assert max(readings) > 0.2, readings
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert busy_cores(proc.pid) is None  # the leader is gone
