"""CPU time a server's processes spend, by role, over a stretch of a benchmark.

A flood on a CPU server shares the cores between the ranks (schedulers
running the model) and the processes around them: the HTTP server with the
tokenizer, the detokenizer, and under ``--dp`` the data-parallel controller
that runs our router. Where a ``--dp 2`` server loses throughput against
one pinned single-worker server, these shares say which process took the
cores. SGLang names its processes (``sglang::scheduler_DP0``,
``sglang::detokenizer``, ``sglang::data_parallel_controller``); the launcher
process left with its own name is the HTTP server and tokenizer.

    before = snapshot(server.pid)
    ...  # the flood
    seconds = by_role(before, snapshot(server.pid))  # {"ranks": 31.2, "controller": 1.4, ...}
"""

from __future__ import annotations

import psutil

ROLES = ("ranks", "http+tokenizer", "detokenizer", "controller", "other")
_NAMED = (("sglang::scheduler", "ranks"), ("sglang::detokenizer", "detokenizer"),
          ("sglang::data_parallel_controller", "controller"))


def role(name: str, is_root: bool) -> str:
    """The role of a server process from its process name; the root process serves HTTP and tokenizes."""
    for prefix, named in _NAMED:
        if name.startswith(prefix):
            return named
    return "http+tokenizer" if is_root else "other"


def snapshot(root_pid: int) -> dict[int, tuple[str, float]]:
    """pid -> (role, CPU seconds so far, user + system) for the root process and every descendant."""
    out: dict[int, tuple[str, float]] = {}
    try:
        root = psutil.Process(root_pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess as exc:
        raise RuntimeError(f"server process {root_pid} is gone") from exc
    for proc in procs:
        try:
            # cmdline carries the whole title SGLang sets; name() is cut to 15 characters on Linux
            title = " ".join(proc.cmdline()) or proc.name()
            times = proc.cpu_times()
        except psutil.Error:  # ended between listing and reading: its time is lost either way
            continue
        out[proc.pid] = (role(title, proc.pid == root_pid), times.user + times.system)
    return out


def by_role(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]]) -> dict[str, float]:
    """CPU seconds each role spent between two snapshots (a process that started in between counts whole)."""
    spent = dict.fromkeys(ROLES, 0.0)
    for pid, (name, seconds) in after.items():
        spent[name] += seconds - before.get(pid, (name, 0.0))[1]
    return spent
