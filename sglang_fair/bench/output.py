"""Writing and reading a run directory.

A run directory holds:

* ``summary.json``: metrics overall and per client (docs/metrics.md);
* ``records.jsonl``: every RequestRecord, one JSON object per line, so the
  metrics can be recomputed or extended later;
* ``timeline.csv``: per window and client, the service rate, cumulative
  service and outstanding requests;
* ``response_time.png``, ``service_rate.png``, ``cumulative_service.png``.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from sglang_fair.bench.plots import plot_run
from sglang_fair.runs.records import RequestRecord, RunResult
from sglang_fair.metrics.service import ServiceWeights
from sglang_fair.metrics.summary import TIMELINE_COLUMNS, summarize, timeline

SUMMARY = "summary.json"
RECORDS = "records.jsonl"
TIMELINE = "timeline.csv"


def write_run(out_dir: Path, result: RunResult, run_info: dict, well_behaved: dict[str, bool],
              weights: ServiceWeights, window_s: float | None = None, plots: bool = True) -> dict:
    """Compute the metrics of ``result`` and write the run directory; returns the summary.
    ``plots=False`` skips the figures (a grid of hundreds of runs)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    records = result.records
    with (out_dir / RECORDS).open("w") as f:
        for r in records:
            f.write(json.dumps(r.to_dict()) + "\n")
    run = {**run_info, "partial": result.partial, "errors": list(result.errors), "backend_meta": result.meta,
           "params": result.params}
    summary = summarize(records, weights=weights, well_behaved=well_behaved, window_s=window_s, run=run)
    (out_dir / SUMMARY).write_text(json.dumps(summary, indent=2, sort_keys=False) + "\n")
    rows = timeline(records, weights, summary["window_s"]) if records else []
    with (out_dir / TIMELINE).open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=TIMELINE_COLUMNS)
        w.writeheader()
        w.writerows(rows)
    if records and plots:
        simulated = " (simulated)" if run_info.get("backend") == "sim" else ""
        title = f"{run_info.get('scenario_name', '')} [{run_info.get('policy') or '?'}]{simulated}"
        plot_run(records, rows, {c: v["well_behaved"] for c, v in summary["clients"].items()}, title, out_dir)
    return summary


def read_summary(run_dir: Path) -> dict:
    path = Path(run_dir) / SUMMARY
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: cannot read a run summary: {e}") from e


def read_records(run_dir: Path) -> list[RequestRecord]:
    path = Path(run_dir) / RECORDS
    out = []
    with path.open() as f:
        for n, line in enumerate(f, 1):
            try:
                out.append(RequestRecord(**json.loads(line)))
            except (json.JSONDecodeError, TypeError) as e:
                raise ValueError(f"{path}: record {n}: {e}") from e
    return out
