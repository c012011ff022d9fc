"""When a freshly started server's processes have gone quiet (``LocalServer`` waits for it).

Healthy is not yet quiet: under ``--use-ray`` SGLang spawns the detokenizer only
once the scheduler actors are up, and with ``--skip-tokenizer-init`` the server
answers while that process still imports, on a full core for 10-20 s on a
2-core machine; the workers a test then measures would run in turns.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

QUIET_CORES = 0.5  # the whole process tree under half a core counts as quiet


def busy_cores(pid: int, window_s: float = 0.5) -> float | None:
    """Cores the process tree led by ``pid`` used over ``window_s``; None once the leader is gone."""
    import psutil

    try:
        leader = psutil.Process(pid)
        tree = [leader, *leader.children(recursive=True)]
    except psutil.NoSuchProcess:
        return None  # it died: the caller's first request says so
    for proc in tree:
        with contextlib.suppress(psutil.Error):
            proc.cpu_percent(None)  # starts the window
    time.sleep(window_s)
    busy = 0.0
    for proc in tree:
        with contextlib.suppress(psutil.Error):
            busy += proc.cpu_percent(None) / 100
    return busy


def wait_quiet(deadline: float, sample: Callable[[], float | None],
               clock: Callable[[], float] = time.monotonic) -> None:
    """Take ``sample()`` readings until one is under ``QUIET_CORES`` (or None), or ``deadline``."""
    while clock() < deadline:
        busy = sample()
        if busy is None or busy < QUIET_CORES:
            return
