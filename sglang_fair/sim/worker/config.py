"""A simulated worker's settings (SGLang's server arguments and environment) and its counters."""

from __future__ import annotations

from dataclasses import dataclass

from sglang_fair.core import checks


class SimulationError(RuntimeError):
    """The simulated worker reached a state SGLang could not be in."""


@dataclass
class WorkerConfig:
    kv_pool_tokens: int
    chunked_prefill_size: int = 8192
    max_prefill_tokens: int = 16384
    max_running_requests: int = 1024
    clip_max_new_tokens: int = 4096  # SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION
    init_new_token_ratio: float = 0.7  # SGLANG_INIT_NEW_TOKEN_RATIO
    min_new_token_ratio_factor: float = 0.14
    new_token_ratio_decay_steps: int = 600
    retract_decode_steps: int = 20
    # SGLang's LPM matches and sorts the queue only up to this many waiting
    # requests (WAITING_QUEUE_PREFIX_MATCH_MAX) and is FCFS beyond; the
    # binding keeps SGLang's sort, so cache-aware policies see the same.
    lpm_queue_limit: int = 128
    enable_mixed_chunk: bool = False  # SGLang's --enable-mixed-chunk

    def check(self) -> None:
        for name in ("kv_pool_tokens", "chunked_prefill_size", "max_prefill_tokens", "max_running_requests",
                     "clip_max_new_tokens", "new_token_ratio_decay_steps", "lpm_queue_limit"):
            checks.positive_int(f"simulator option {name}", getattr(self, name))
        if not 0 < self.init_new_token_ratio <= 1:
            raise ValueError(f"init_new_token_ratio must be in (0, 1], got {self.init_new_token_ratio!r}")


@dataclass
class WorkerStats:
    prefill_batches: int = 0
    decode_steps: int = 0
    decode_tokens: int = 0  # tokens decoded: batch x steps
    # each decoded token's step time, summed, ms: over decode_tokens, the step a running request waits
    # for per token, which grows with the batch it shares
    decode_token_ms: float = 0.0
    retractions: int = 0
    evicted_tokens: int = 0
    prefill_tokens: int = 0  # tokens computed by prefills (extend, chunks, re-prefills)
    preemptions: int = 0  # running requests whose slot latency isolation took
    recomputed_tokens: int = 0  # prefilled again after a retraction or preemption (waste)
    decode_turns: int = 0  # decode steps latency isolation put before a prefill
