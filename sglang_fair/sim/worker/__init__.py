"""One simulated SGLang worker (a DP rank): its scheduler loop in virtual time.

Semantics follow SGLang 0.5.23's default (non-mixed) scheduler:

* each iteration is either a prefill batch or one decode step of the whole
  running batch; a prefill is tried first whenever the queue is not empty and
  the batch is not marked full;
* admission (waiting_queue.py): the FairScheduler orders the queue and walks
  it against SGLang's ``PrefillAdder`` budgets; a prompt longer than the chunk
  budget is prefilled in chunks over several iterations;
* with ``enable_mixed_chunk`` (SGLang's ``--enable-mixed-chunk``) a prefill
  iteration also decodes the running batch one step (``mix_with_running``);
  the running batch's size comes off the prefill and chunk budgets, and rows
  that find no KV slot sit the step out, as in SGLang;
* decode (running_batch.py) needs one KV slot per running request per step;
  when the pool (kv_pool.py: free + evictable cache) runs out, requests are
  retracted back to the queue and ``new_token_ratio`` is raised;
  it decays again on every decode step.

Decode steps run in segments timed in closed form (timing.py): between two
events every step does the same thing, so a segment of k steps is charged with
one ``produced`` call per request, and can be cut short at the step boundary
after an arrival when the loop would admit it. ``SimWorker`` (worker.py)
composes these managers.
"""

from sglang_fair.sim.worker.config import SimulationError, WorkerConfig, WorkerStats
from sglang_fair.sim.worker.request import IterationResult, SimRequest
from sglang_fair.sim.worker.waiting_queue import IN_BATCH_PREFIX_TOKENS
from sglang_fair.sim.worker.worker import SimWorker

__all__ = [
    "IN_BATCH_PREFIX_TOKENS",
    "IterationResult",
    "SimRequest",
    "SimWorker",
    "SimulationError",
    "WorkerConfig",
    "WorkerStats",
]
