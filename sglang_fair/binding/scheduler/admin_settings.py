"""Run-time admin, the schedulers' side: validate a settings change, apply it, report the settings in force.

The HTTP server's ``/fair/settings`` (``http/admin_routes.py``) sends the
change through SGLang's own admin path, ``SetInternalStateReq``, under the key
``fair_settings``: each scheduler validates it again, applies it to its
FairScheduler, effective from its next scheduling pass, and logs it.

Hooks:
* ``accept_fair_settings`` AFTER
  ``scheduler_components.internal_state.SchedulerInternalStateController._update_handlers``.
* ``report_fair_settings`` AFTER ``SchedulerInternalStateController.get_internal_state``.
* SGLang 0.5.21 keeps both on the scheduler, with no table of updatable keys:
  ``set_fair_settings`` AROUND ``Scheduler.set_internal_state`` takes the
  ``fair_settings`` key (alone: a request mixing it with SGLang's keys is
  refused), and ``report_fair_settings`` is AFTER ``Scheduler.get_internal_state``.
"""

from __future__ import annotations

import logging

from sglang_fair.binding.common.settings import ADMIN_SETTINGS_KEY
from sglang_fair.binding.scheduler.schedule_policy import fair_policy
from sglang_fair.core import OptionError, SettingsUpdate

logger = logging.getLogger(__name__)


def accept_fair_settings(handlers: dict, controller, *args, **kwargs) -> dict:
    from sglang.srt.managers.scheduler_components.internal_state import UpdateRejected, _UpdateHandler

    def validate(key: str, value) -> None:
        problem = _settings_problem(controller.scheduler, value)
        if problem:
            raise UpdateRejected(problem)

    def apply(key: str, value) -> None:
        _apply_settings(controller.scheduler, value)

    handlers[ADMIN_SETTINGS_KEY] = _UpdateHandler(validate, apply)
    return handlers


def set_fair_settings(original, scheduler, recv_req, *args, **kwargs):
    """SGLang 0.5.21: the scheduler answers ``SetInternalStateReq`` itself."""
    from sglang.srt.managers.io_struct import SetInternalStateReqOutput

    requested = recv_req.server_args
    if ADMIN_SETTINGS_KEY not in requested:
        return original(scheduler, recv_req, *args, **kwargs)
    problem = _settings_problem(scheduler, requested[ADMIN_SETTINGS_KEY])
    if problem is None and len(requested) > 1:
        problem = f"{ADMIN_SETTINGS_KEY} is changed alone, not with {sorted(set(requested) - {ADMIN_SETTINGS_KEY})}"
    if problem:
        logger.warning(problem)
        return SetInternalStateReqOutput(updated=False)
    _apply_settings(scheduler, requested[ADMIN_SETTINGS_KEY])
    return SetInternalStateReqOutput(updated=True)


def report_fair_settings(result, owner, *args, **kwargs):
    # ``owner``: the internal-state controller, or on SGLang 0.5.21 the scheduler itself.
    from sglang.srt.runtime_context import get_parallel

    policy = fair_policy(getattr(owner, "scheduler", owner))
    if policy is not None:
        # Answers reach the HTTP server in arrival order: the rank says whose they are.
        result.internal_state["fair"] = {"dp_rank": get_parallel().dp_rank or 0, **policy.fair.settings()}
    return result


def _settings_problem(scheduler, value) -> str | None:
    policy = fair_policy(scheduler)
    if policy is None:
        return "fair settings: this scheduler runs no sglang-fair policy"
    try:
        update = SettingsUpdate.parse(value)
    except OptionError as exc:
        return str(exc)
    if update.throttle and policy.fair.policy.throttle_settings() is None:
        return f"fair settings: policy {policy.fair.options.policy} does not throttle"
    return None


def _apply_settings(scheduler, value) -> None:
    settings = fair_policy(scheduler).fair.update_settings(SettingsUpdate.parse(value))
    logger.info("sglang-fair: settings changed at run time: %s", settings)
