"""``AdmissionPass``: the state of one admission pass, from the gate to the adder.

One pass is one call of SGLang's ``Scheduler._get_new_batch_prefill_raw``. The
admission gate (``admission_gate.gate_prefill_admission``) creates the pass
before it, with what it decided for it (latency isolation's starved clients,
and whether it may preempt for them), and opens it on the scheduler's policy
(``FairSchedulePolicy.admitting``) for the two calls SGLang makes inside the
pass that the gate cannot reach:

* ``FairSchedulePolicy.calc_priority`` starts the pass's walk and keeps it
  here (``walk``);
* the adder is built with the pass: ``prefill_adder.fair_prefill_adder`` binds
  it (SGLang 0.5.22 on, and any patched SGLang), or ``FairPrefillAdder`` finds
  it through the policy of the tree cache it is built with (unpatched 0.5.21,
  which builds the adder by class name).

The gate closes the pass when SGLang's call returns or raises; an adder that
outlives its pass (a gated policy's) then finds no walk and refuses to admit.
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass

from sglang_fair.binding.scheduler.admission_walk import AdmissionWalk


@dataclass(eq=False)  # one pass is one object: compared by identity
class AdmissionPass:
    # Latency isolation: the starved clients this pass offers room first (empty without isolation).
    starved: Set[str] = frozenset()
    # Whether the pass may preempt running requests for them: it started with a full batch.
    preempting: bool = False
    # Started by calc_priority (gated policies only); None until SGLang sorts the queue, and once closed.
    walk: AdmissionWalk | None = None
    closed: bool = False

    def close(self) -> None:
        """The pass is over: its walk, and the queue that walk holds, are let go."""
        self.walk = None
        self.closed = True
