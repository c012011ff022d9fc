"""``FairPrefillAdder``: SGLang's ``PrefillAdder`` for a fair policy's admission pass.

SGLang builds one adder per admission pass, inside the pass
(``Scheduler._get_new_batch_prefill_raw``), in one of two ways:

* from ``Scheduler.get_prefill_adder_class()`` (0.5.22 and later, and every
  SGLang built from ``patches/``): our AFTER hook on it,
  ``fair_prefill_adder``, hands SGLang this class bound to the scheduler's
  policy and to the pass in progress (``admission_pass.py``);
* by the name ``PrefillAdder`` (unpatched 0.5.21): the hook table REPLACEs
  that name with this class, built with SGLang's arguments only. Of those, the
  tree cache is the scheduler's, the one its policy was built with: the adder
  takes that policy (``schedule_policy.policy_of_cache``) and the pass it
  holds, and outside a pass is the stock adder.

Beyond taking the policy and the pass, one method differs from SGLang's:
``add_one_req``, the admission loop's one admission call. Under a gated
policy it admits only the candidate of the pass's walk
(``admission_walk.py``) and then puts the next candidate where the loop reads
next; once the walk is over it answers ``OTHER``, which ends SGLang's loop.
Under every policy of ours it charges an admitted request's extend tokens
(after the cache match: cached prefix tokens are free under DLPM), and in an
isolation pass it answers a refusal for lack of KV tokens by preempting the
core's victims one at a time.
"""

from __future__ import annotations

import functools

from sglang.srt.managers.schedule_policy import AddReqResult, PrefillAdder

from sglang_fair.binding.common.version import installed_sglang
from sglang_fair.binding.scheduler import isolation
from sglang_fair.binding.scheduler.admission_pass import AdmissionPass
from sglang_fair.binding.scheduler.admission_walk import AdmissionBypassed, bypassed
from sglang_fair.binding.scheduler.schedule_policy import FairSchedulePolicy, fair_policy, policy_of_cache


def fair_prefill_adder(adder_cls: type, scheduler, *args, **kwargs):
    """AFTER ``Scheduler.get_prefill_adder_class``: the fair adder, bound to the scheduler's
    policy and its pass in progress; SGLang's class where the policy is not ours."""
    fair = fair_policy(scheduler)
    if fair is None:
        return adder_cls
    if adder_cls is not PrefillAdder:  # an adder of SGLang's own we do not extend: refuse, never run unfair
        raise AdmissionBypassed(
            f"sglang-fair: SGLang {installed_sglang()} builds its prefill adder from {adder_cls.__qualname__}, "
            "not PrefillAdder; the fair policy cannot charge or gate admission through it")
    return functools.partial(FairPrefillAdder, fair_policy=fair, admission=fair.admission)


class FairPrefillAdder(PrefillAdder):
    def __init__(self, *args, fair_policy: FairSchedulePolicy | None = None, admission: AdmissionPass | None = None,
                 **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if fair_policy is None:  # built by class name (0.5.21): the pass of the policy of this tree cache
            owner = policy_of_cache(self.tree_cache)
            admission = owner.admission if owner is not None else None
            fair_policy = owner if admission is not None else None  # outside a pass: the stock adder
        self.fair_policy = fair_policy
        self.admission = admission

    def add_one_req(self, req, *args, **kwargs):
        fair = self.fair_policy
        if fair is None:
            return super().add_one_req(req, *args, **kwargs)
        admission = self.admission
        walk = admission.walk if fair.gated and admission is not None else None
        if fair.gated and walk is None:
            raise bypassed(f"the admission loop asked to admit {req.rid!r} before calc_priority started the fair "
                           "policy's walk")
        if walk is not None and not walk.offer(req):
            return AddReqResult.OTHER if walk.current is None else AddReqResult.CONTINUE
        result = super().add_one_req(req, *args, **kwargs)
        # Isolation: short of KV tokens, free them one victim at a time; the
        # prefix is matched again since releasing may evict cached nodes.
        preempting = admission is not None and admission.preempting
        while (preempting and result is AddReqResult.NO_TOKEN and not self._admitted(req)
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
