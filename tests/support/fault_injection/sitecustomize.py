"""Faults injected into sglang-fair inside a real server's processes (tests only).

On PYTHONPATH with ``SGLANG_FAIR_TEST_FAULTS=1``: requests of client ``boom``
make ``FairSchedulePolicy.on_queued`` raise, and those of client ``bang`` make
the arrival check (``FairScheduler.check_arrival``) raise, as a bug in our
code would; the server must answer each such request with one error and keep
serving the others.
"""

import os

if os.environ.get("SGLANG_FAIR_TEST_FAULTS") == "1":
    try:
        from sglang_fair.binding.scheduler import schedule_policy as _policy
        from sglang_fair.core import fair_scheduler as _core
    except ImportError:  # a process without SGLang installed (none in these tests)
        pass
    else:
        _on_queued = _policy.FairSchedulePolicy.on_queued
        _check_arrival = _core.FairScheduler.check_arrival

        def on_queued(self, req):
            if (req.routing_key or "").startswith("boom"):
                raise RuntimeError("injected fault in on_queued")
            return _on_queued(self, req)

        def check_arrival(self, client, *args, **kwargs):
            if client == "bang":
                raise RuntimeError("injected fault in check_arrival")
            return _check_arrival(self, client, *args, **kwargs)

        _policy.FairSchedulePolicy.on_queued = on_queued
        _core.FairScheduler.check_arrival = check_arrival
