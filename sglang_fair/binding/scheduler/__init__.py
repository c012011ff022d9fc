"""Each scheduler process (one per data-parallel and tensor-parallel rank; a Ray actor under ``--use-ray``).

What of ours runs here:

* ``schedule_policy``: ``FairSchedulePolicy`` replaces SGLang's
  ``SchedulePolicy`` and holds the core ``FairScheduler``;
* ``admission_walk``: the policy's candidates, put where SGLang's admission
  loop reads next (started by ``FairSchedulePolicy.calc_priority``);
* ``prefill_adder``: ``FairPrefillAdder``, SGLang's ``PrefillAdder`` admitting
  only the walk's candidate and charging it;
* ``admission_gate``: around each admission pass
  (``Scheduler._get_new_batch_prefill_raw``): room for starved clients, and
  the check that every admission went through the fair adder;
* ``accounting``: requests queued, admitted, charged, aborted, throttled
  (``Scheduler._add_request_to_queue``, ``get_prefill_adder_class``,
  ``process_batch_result``, ``abort_request``, ``on_idle``, ``_abort_on_queued_limit``);
* ``isolation``: preemption for starved clients, released as SGLang releases its own;
* ``client_metrics``: the per-client Prometheus series;
* ``admin_settings``: run-time settings changes, validated and applied;
* ``router_reports``: what each worker tells the data-parallel router
  (admissions, progress, completions) over the report channel.
"""
