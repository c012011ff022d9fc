"""sglang_fair/bench/process_cpu.py: roles from SGLang's process titles, and CPU time between snapshots."""

import os
import subprocess
import sys
import time

import pytest

from sglang_fair.bench.process_cpu import ROLES, by_role, role, snapshot


def test_roles_follow_the_titles_sglang_sets():
    assert role("sglang::scheduler_DP1", is_root=False) == "ranks"
    assert role("sglang::scheduler_TP0", is_root=False) == "ranks"
    assert role("sglang::detokenizer", is_root=False) == "detokenizer"
    assert role("sglang::data_parallel_controller", is_root=False) == "controller"
    assert role("python -m sglang_fair.launch_server --dp 2", is_root=True) == "http+tokenizer"
    assert role("python -c from multiprocessing.resource_tracker import main", is_root=False) == "other"


def test_by_role_counts_what_each_process_spent_between_snapshots():
    before = {1: ("http+tokenizer", 2.0), 2: ("ranks", 10.0), 3: ("ranks", 5.0)}
    after = {1: ("http+tokenizer", 2.5), 2: ("ranks", 14.0), 3: ("ranks", 6.0), 4: ("controller", 0.3)}
    spent = by_role(before, after)
    assert list(spent) == list(ROLES)
    assert spent["ranks"] == pytest.approx(5.0)
    assert spent["http+tokenizer"] == pytest.approx(0.5)
    assert spent["controller"] == pytest.approx(0.3)  # started in between: all of it counts
    assert spent["detokenizer"] == spent["other"] == 0.0


def test_snapshot_sees_a_busy_child_process():
    # the child spins only once told to, so all of its 0.3 s of CPU falls after the first snapshot
    spin_then_sleep = ("import sys, time\nsys.stdin.readline()\nend = time.process_time() + 0.3\n"
                       "while time.process_time() < end: pass\ntime.sleep(30)")
    child = subprocess.Popen([sys.executable, "-c", spin_then_sleep], stdin=subprocess.PIPE, text=True)
    try:
        before = snapshot(os.getpid())
        assert before[child.pid][0] == "other"
        child.stdin.write("go\n")
        child.stdin.flush()
        deadline = time.monotonic() + 20
        while by_role(before, snapshot(os.getpid()))["other"] < 0.2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert by_role(before, snapshot(os.getpid()))["other"] >= 0.2
    finally:
        child.kill()
        child.wait()


def test_snapshot_of_a_missing_process_names_it():
    with pytest.raises(RuntimeError, match="is gone"):
        snapshot(2**22 + 12345)
