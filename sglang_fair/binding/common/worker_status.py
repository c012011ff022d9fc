"""The workers' liveness file: the data-parallel controller writes it, the HTTP server reads it.

The controller knows which workers are alive; the HTTP server is another
process (the same one under ``--use-ray``). The launcher exports a path
(``settings.export_status_path``); the controller rewrites the file whenever
a worker dies, and ``/health`` and ``/server_info`` read it.
"""

from __future__ import annotations

import json
import os

from sglang_fair.binding.common import settings


def write_status(alive: list[bool]) -> None:
    """Controller side: record the workers' liveness (atomically; nothing if no path was exported)."""
    path = settings.status_path()
    if not path:
        return
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump({"alive": [bool(a) for a in alive]}, f)
    os.replace(tmp, path)


def read_workers() -> dict | None:
    """``{"alive": [ranks], "dead": [ranks]}`` as the controller last wrote it, or None."""
    path = settings.status_path()
    if not path:
        return None
    try:
        with open(path) as f:
            alive = json.load(f)["alive"]
    except (OSError, ValueError, KeyError, TypeError):
        return None  # not written yet (controller starting), or no router
    return {"alive": [r for r, a in enumerate(alive) if a], "dead": [r for r, a in enumerate(alive) if not a]}


def degraded_body(workers: dict | None) -> dict | None:
    """The 503 body for a health check, or None when every worker is alive (or nothing is known)."""
    if not workers or not workers["dead"]:
        return None
    return {"status": "degraded", "alive_workers": workers["alive"], "dead_workers": workers["dead"],
            "message": f"data-parallel worker(s) {', '.join(map(str, workers['dead']))} died; "
                       "restart the server to restore its capacity"}
