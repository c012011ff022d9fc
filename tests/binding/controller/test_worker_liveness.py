"""Telling dead data-parallel workers, process backend (Ray's is in test_dp_hooks.py)."""

from __future__ import annotations

import subprocess
import sys

from sglang_fair.binding.controller.worker_liveness import ProcessLiveness


def test_a_worker_whose_scheduler_process_exited_is_dead() -> None:
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    try:
        liveness = ProcessLiveness(3, 0.0, procs=lambda: [])
        liveness.hello(0, alive.pid)
        liveness.hello(1, gone.pid)
        # Rank 2 never said hello: not known dead (the controller warns about it instead).
        assert liveness.dead_ranks() == [1]
    finally:
        alive.kill()
        alive.wait()
