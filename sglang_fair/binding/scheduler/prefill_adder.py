"""``FairPrefillAdder``: SGLang's ``PrefillAdder`` for a fair policy's admission pass.

SGLang builds one adder per admission pass, from
``Scheduler.get_prefill_adder_class()`` (0.5.22 and later; our AFTER hook,
``accounting.fair_prefill_adder``, hands it this class bound to the
scheduler's policy) or by the name ``PrefillAdder`` (0.5.21; the hook table
REPLACEs that name with this class, which then takes the policy of the pass in
progress from the admission gate, and is the stock adder outside one). Three
methods differ from SGLang's:

* ``__init__``: remembers the policy, and tells the admission gate that the
  admission loop comes next (``admission_gate.fair_adder_built``);
* ``add_one_req`` (the loop's one admission call): checks that the request is
  the policy's candidate, charges its extend tokens once admitted (after the
  cache match: cached prefix tokens are free under DLPM), and in an isolation
  pass answers a refusal for lack of KV tokens by preempting the core's
  victims one at a time;
* ``preempt_to_schedule`` (SGLang's priority preemption, called when the
  batch is full): in an isolation pass, preempts the core's victim instead.
"""

from __future__ import annotations

from sglang.srt.managers.schedule_policy import AddReqResult, PrefillAdder

from sglang_fair.binding.scheduler import admission_gate, isolation
from sglang_fair.binding.scheduler.schedule_policy import FairSchedulePolicy


class FairPrefillAdder(PrefillAdder):
    def __init__(self, *args, fair_policy: FairSchedulePolicy | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # Bound by get_prefill_adder_class, else the pass's (None outside one: the stock adder).
        self.fair_policy = fair_policy if fair_policy is not None else admission_gate.pass_policy()
        if self.fair_policy is not None:
            admission_gate.fair_adder_built(self.fair_policy)

    def add_one_req(self, req, *args, **kwargs):
        fair = self.fair_policy
        if fair is None:
            return super().add_one_req(req, *args, **kwargs)
        admission_gate.check_offered(fair, req)
        result = super().add_one_req(req, *args, **kwargs)
        # Isolation: short of KV tokens, free them one victim at a time; the
        # prefix is matched again since releasing may evict cached nodes.
        while (fair.preempting and result is AddReqResult.NO_TOKEN and not self._admitted(req)
               and isolation.preempt_one(self, fair, req)):
            req.init_next_round_input(self.tree_cache)
            result = super().add_one_req(req, *args, **kwargs)
        if self._admitted(req):
            fair.on_admitted(req)
        return result

    def preempt_to_schedule(self, req) -> bool:
        if self.fair_policy is None or not self.fair_policy.preempting:
            return super().preempt_to_schedule(req)
        return isolation.preempt_one(self, self.fair_policy, req)

    def _admitted(self, req) -> bool:
        """SGLang's own test: an admitted request is the last of ``can_run_list``."""
        return bool(self.can_run_list) and self.can_run_list[-1] is req
