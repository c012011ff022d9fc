"""A Prometheus multiprocess file we write whole: series that must disappear when their client does.

prometheus_client's own metrics keep every label set they ever saw; the
schedulers' per-client series (``scheduler/client_metrics.py``) and the
router's (``controller/router_metrics.py``) are rewritten each refresh instead.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable

_FILE_PREFIX = {"counter": "counter", "gauge": "gauge_mostrecent", "histogram": "histogram"}
FILE_KINDS = tuple(_FILE_PREFIX)


class SeriesFile:
    """One multiprocess metrics file of one kind, rewritten whole on each ``write``.

    Series absent from a write are gone from ``/metrics``, and the file holds
    only what was written last, unlike prometheus_client's own metrics.
    ``kind``: "gauge" (most recent value wins), "counter" or "histogram"
    (summed with other processes' files, as prometheus_client does).
    """

    def __init__(self, directory: str | None, tag: str, kind: str = "gauge") -> None:
        directory = directory or os.environ.get("PROMETHEUS_MULTIPROC_DIR")
        if not directory:
            raise ValueError("sglang-fair metrics need PROMETHEUS_MULTIPROC_DIR (SGLang sets it with --enable-metrics)")
        self.path = os.path.join(directory, f"{_FILE_PREFIX[kind]}_{tag}.db")

    def write(self, samples: Iterable[tuple[str, str, dict[str, str], str, float]]) -> None:
        """Replace the file's series with ``samples``: (metric, sample name, labels, help, value)."""
        from prometheus_client.mmap_dict import MmapedDict, mmap_key

        tmp = f"{self.path[:-3]}.{os.getpid()}.tmp"  # not *.db: the collector never reads it half-written
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
        now = time.time()
        out = MmapedDict(tmp)
        try:
            for metric, name, labels, help_text, value in samples:
                out.write_value(mmap_key(metric, name, list(labels), list(labels.values()), help_text),
                                float(value), now)
        finally:
            out.close()
        os.replace(tmp, self.path)
