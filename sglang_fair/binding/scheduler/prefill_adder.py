"""``FairPrefillAdder``: SGLang's ``PrefillAdder`` for a fair policy's admission pass.

SGLang builds one adder per admission pass, from
``Scheduler.get_prefill_adder_class()`` (0.5.22 and later; our AFTER hook,
``accounting.fair_prefill_adder``, hands it this class bound to the
scheduler's policy) or by the name ``PrefillAdder`` (0.5.21; the hook table
REPLACEs that name with this class, which then takes the policy of the pass in
progress from the admission gate, and is the stock adder outside one).

Beyond taking the policy, one method differs from SGLang's: ``add_one_req``, the admission loop's one
admission call. Under a gated policy it admits only the candidate of the
pass's walk (``admission_walk.py``) and then puts the next candidate where
the loop reads next; once the walk is over it answers ``OTHER``, which ends
SGLang's loop. Under every policy of ours it charges an admitted request's
extend tokens (after the cache match: cached prefix tokens are free under
DLPM), and in an isolation pass it answers a refusal for lack of KV tokens by
preempting the core's victims one at a time.
"""

from __future__ import annotations

from sglang.srt.managers.schedule_policy import AddReqResult, PrefillAdder

from sglang_fair.binding.scheduler import admission_gate, isolation
from sglang_fair.binding.scheduler.admission_walk import bypassed
from sglang_fair.binding.scheduler.schedule_policy import FairSchedulePolicy


class FairPrefillAdder(PrefillAdder):
    def __init__(self, *args, fair_policy: FairSchedulePolicy | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # Bound by get_prefill_adder_class, else the pass's (None outside one: the stock adder).
        self.fair_policy = fair_policy if fair_policy is not None else admission_gate.pass_policy()

    def add_one_req(self, req, *args, **kwargs):
        fair = self.fair_policy
        if fair is None:
            return super().add_one_req(req, *args, **kwargs)
        walk = fair.walk if fair.gated else None
        if fair.gated and walk is None:
            raise bypassed(f"the admission loop asked to admit {req.rid!r} before calc_priority started the fair "
                           "policy's walk")
        if walk is not None and not walk.offer(req):
            return AddReqResult.OTHER if walk.current is None else AddReqResult.CONTINUE
        result = super().add_one_req(req, *args, **kwargs)
        # Isolation: short of KV tokens, free them one victim at a time; the
        # prefix is matched again since releasing may evict cached nodes.
        while (fair.preempting and result is AddReqResult.NO_TOKEN and not self._admitted(req)
               and isolation.preempt_one(self, fair, req)):
            req.init_next_round_input(self.tree_cache)
            result = super().add_one_req(req, *args, **kwargs)
        if self._admitted(req):
            fair.on_admitted(req)
        if walk is not None and result is AddReqResult.CONTINUE:  # else SGLang's loop stops here
            walk.advance()
            if walk.current is None:
                return AddReqResult.OTHER  # the policy offers no one else this pass
        return result

    def _admitted(self, req) -> bool:
        """SGLang's own test: an admitted request is the last of ``can_run_list``."""
        return bool(self.can_run_list) and self.can_run_list[-1] is req
