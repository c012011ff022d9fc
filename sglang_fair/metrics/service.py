"""Per-client service over time, from RequestRecords only.

Service of a request (VTC paper §3, DLPM paper §6.1) is
``w_input * input + w_output * output_tokens``; ``input`` is the whole prompt
(default) or, with ``input_mode="extend"``, the prompt minus the tokens the
server reported as cached.

Records carry three times, so service is placed in time like this: the
input part at the first token (prefill has finished by then), the output part
spread evenly from the first token to the end. Without a first-token time
both parts are placed at ``t_done``. Failed requests count no service.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sglang_fair.runs.records import RequestRecord

INPUT_MODES = ("prompt", "extend")


@dataclass(frozen=True)
class ServiceWeights:
    w_input: float = 1.0
    w_output: float = 2.0
    input_mode: str = "prompt"

    def __post_init__(self) -> None:
        if self.w_input < 0 or self.w_output < 0:
            raise ValueError(f"service weights must be >= 0, got input {self.w_input}, output {self.w_output}")
        if self.input_mode not in INPUT_MODES:
            raise ValueError(f"input_mode must be one of {INPUT_MODES}, got {self.input_mode!r}")

    def input_service(self, r: RequestRecord) -> float:
        tokens = r.prompt_tokens
        if self.input_mode == "extend" and r.cached_tokens is not None:
            tokens = max(0, tokens - r.cached_tokens)
        return self.w_input * tokens

    def output_service(self, r: RequestRecord) -> float:
        return self.w_output * r.output_tokens

    def service(self, r: RequestRecord) -> float:
        return self.input_service(r) + self.output_service(r) if r.ok else 0.0


def done_records(records: list[RequestRecord]) -> list[RequestRecord]:
    return [r for r in records if r.ok and r.t_done is not None]


def cumulative_service(records: list[RequestRecord], times: np.ndarray, weights: ServiceWeights) -> np.ndarray:
    """Service the given records had received by each time in ``times``."""
    times = np.asarray(times, dtype=float)
    total = np.zeros_like(times)
    for r in done_records(records):
        start = r.t_first_token if r.t_first_token is not None else r.t_done
        total += weights.input_service(r) * (times >= start)
        out = weights.output_service(r)
        if r.t_done > start:
            frac = np.clip((times - start) / (r.t_done - start), 0.0, 1.0)
        else:
            frac = (times >= r.t_done).astype(float)
        total += out * frac
    return total


def outstanding(records: list[RequestRecord], times: np.ndarray) -> np.ndarray:
    """Requests sent and not yet finished (or failed) at each time: the
    client is *backlogged* at t when this is > 0."""
    times = np.asarray(times, dtype=float)
    count = np.zeros_like(times)
    for r in records:
        end = r.t_done if r.t_done is not None else r.t_sent  # a failed request stops counting at once
        count += (times >= r.t_sent) & (times < end)
    return count


def by_client(records: list[RequestRecord]) -> dict[str, list[RequestRecord]]:
    out: dict[str, list[RequestRecord]] = {}
    for r in records:
        out.setdefault(r.client, []).append(r)
    return dict(sorted(out.items()))


def active_interval(records: list[RequestRecord]) -> tuple[float, float] | None:
    """From a client's first request sent to its last request finished."""
    done = done_records(records)
    if not done:
        return None
    return min(r.t_sent for r in records), max(r.t_done for r in done)


def windowed_rates(cum: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Service per second in each window [times[k], times[k+1])."""
    return np.diff(cum) / np.diff(times)


def time_grid(records: list[RequestRecord], window_s: float) -> np.ndarray:
    """Window edges from 0 to past the last finish."""
    if window_s <= 0:
        raise ValueError(f"window must be > 0 seconds, got {window_s}")
    end = max([r.t_done for r in done_records(records)] + [r.t_sent for r in records] + [0.0])
    n = max(1, int(np.ceil(end / window_s)))
    return np.arange(n + 1) * window_s
