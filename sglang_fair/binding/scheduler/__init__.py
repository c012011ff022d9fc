"""Each scheduler process (one per data-parallel and tensor-parallel rank; a Ray actor under ``--use-ray``).

What of ours runs here:

* ``schedule_policy``: ``FairSchedulePolicy`` replaces SGLang's
  ``SchedulePolicy`` and holds the core ``FairScheduler``;
* ``admission_walk``: the policy's candidates, put where SGLang's admission
  loop reads next (started by ``FairSchedulePolicy.calc_priority``);
* ``admission_gate``: around each admission pass
  (``Scheduler._get_new_batch_prefill_raw``): creates the pass, makes room for
  starved clients, and checks that every admission went through the fair adder;
* ``admission_pass``: ``AdmissionPass``, one pass's state (starved clients,
  preemption, the walk), handed from the gate to the policy and the adder;
* ``prefill_adder``: ``FairPrefillAdder``, SGLang's ``PrefillAdder`` admitting
  only the walk's candidate and charging it, and ``fair_prefill_adder``, its
  factory (``Scheduler.get_prefill_adder_class``);
* ``charging``: requests queued, charged for output, aborted, and the idle
  refresh (``Scheduler._add_request_to_queue``, ``process_batch_result``,
  ``abort_request``, ``on_idle``); ``admission_log``: the rank's admission digest;
* ``arrival_throttle``: FairServe's overload throttle on arrivals
  (``Scheduler._abort_on_queued_limit``); ``refusals``: the abort answers our hooks send;
* ``isolation``: preemption for starved clients, released as SGLang releases its own;
* ``client_metrics``: the per-client Prometheus series, and which rank exports them;
* ``admin_settings``: run-time settings changes, validated and applied;
* ``router_reports``: what each worker tells the data-parallel router
  (admissions, progress, completions) over the report channel.
"""
