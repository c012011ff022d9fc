"""Every hook sglang-fair installs into SGLang: one table, the single source.

Each entry names the SGLang target, our function, the hook kind, and the
SGLang function whose source carries the same call when SGLang is built with
``patches/`` applied (None: only the plugin installs it). The plugin
registers every entry on a stock SGLang, and on a patched one only the
entries no patch carries. ``tests/binding/test_hooks.py`` holds the table
against the patch series and the docs; the plugin records what it registered
(``common/applied_hooks.py``) so that a scheduler can refuse to start when
SGLang could not apply a hook it relies on (HookRegistry logs such a failure
and goes on). A few targets depend on the installed release
(``version.SUPPORTED_SGLANG``): where an older release lacks the function a
hook wraps, the table names the nearest one that carries the same call.
"""

from __future__ import annotations

import importlib.util

from sglang.srt.plugins.hook_registry import HookType

from sglang_fair.binding.common.applied_hooks import Hook

_SCHEDULER_MODULE = "sglang.srt.managers.scheduler"
_SCHEDULER = f"{_SCHEDULER_MODULE}.Scheduler"
_TOKENIZER = "sglang.srt.managers.tokenizer_manager.TokenizerManager"
_OPENAI_BASE = "sglang.srt.entrypoints.openai.serving_base.OpenAIServingBase"
_HTTP = "sglang.srt.entrypoints.http_server"
_SERVER_ARGS = "sglang.srt.server_args.ServerArgs"
_DPC = "sglang.srt.managers.data_parallel_controller"
_INTERNAL_STATE = "sglang.srt.managers.scheduler_components.internal_state.SchedulerInternalStateController"
_RECEIVER = "sglang.srt.managers.scheduler_components.request_receiver.SchedulerRequestReceiver"
_RAY_ENGINE = "sglang.srt.ray.engine.RayEngine"
# Every output a scheduler sends for a request goes through here (batch results,
# and requests rejected before running); aborts of queued requests do not.
_STREAMER = "sglang.srt.managers.scheduler_components.output_streamer.SchedulerOutputStreamer.stream_output"
# And every answer for a request a scheduler ends outside that stream (aborted while queued,
# rejected, retracted) goes through here: SGLang 0.5.23 gathered these sends into one method;
# 0.5.21 and 0.5.22 call the tokenizer socket's sender inline, which carries other replies too.
_ABORT_SENDER = f"{_SCHEDULER}.send_abort_output"
_ABORT_SENDER_BEFORE_0_5_23 = "sglang.srt.managers.scheduler_components.output_sender.SenderWrapper.send_output"


def hook_table() -> list[Hook]:
    """All hooks; the Ray backend's only where Ray is installed (SGLang's --use-ray needs it)."""
    from sglang_fair.binding.common import cpu_threads, quiet_exit
    from sglang_fair.binding.common.version import release_before, sends_aborts_inline
    from sglang_fair.binding.controller import router_binding
    from sglang_fair.binding.http import (admin_routes, client_keys, fair_options, health, identity, router_options,
                                          server_info, state_deadline, throttle_response, validation)
    from sglang_fair.binding.scheduler import (admin_settings, admission_gate, arrival_throttle, charging,
                                               prefill_adder, rank_clock, router_reports)
    from sglang_fair.binding.scheduler.schedule_policy import FairSchedulePolicy

    after, before, around, replace = HookType.AFTER, HookType.BEFORE, HookType.AROUND, HookType.REPLACE
    s = "scheduler"
    abort_sender = _ABORT_SENDER_BEFORE_0_5_23 if sends_aborts_inline() else _ABORT_SENDER
    if release_before("0.5.22"):  # SGLang 0.5.21 lacks these seams; the nearest function that carries each
        adder = Hook("sglang.srt.managers.scheduler.PrefillAdder", prefill_adder.FairPrefillAdder, replace, s,
                     f"{_SCHEDULER}._get_new_batch_prefill_raw")
        generate = Hook(f"{_HTTP}.launch_server", identity.identify_generate_route, before, s,
                        f"{_HTTP}.generate_request")
        settings = [Hook(f"{_SCHEDULER}.set_internal_state", admin_settings.set_fair_settings, around, s),
                    Hook(f"{_SCHEDULER}.get_internal_state", admin_settings.report_fair_settings, after, s)]
        server_info = Hook(f"{_HTTP}.launch_server", server_info.describe_router_on_route, before, "router")
        router_process = [Hook("sglang.srt.entrypoints.engine.Engine._launch_scheduler_processes",
                               router_binding.controller_process_loads_plugins, around, "router")]
    else:
        adder = Hook(f"{_SCHEDULER}.get_prefill_adder_class", prefill_adder.fair_prefill_adder, after, s,
                     f"{_SCHEDULER}.get_prefill_adder_class")
        generate = Hook(f"{_HTTP}.serve_generate_request", identity.client_from_generate_headers, before, s,
                        f"{_HTTP}.serve_generate_request")
        settings = [Hook(f"{_INTERNAL_STATE}._update_handlers", admin_settings.accept_fair_settings, after, s),
                    Hook(f"{_INTERNAL_STATE}.get_internal_state", admin_settings.report_fair_settings, after, s)]
        server_info = Hook("sglang.srt.utils.common.build_server_info", server_info.describe_router, after, "router")
        router_process = []  # the controller process loads plugins itself
    table = [
        Hook(f"{_SERVER_ARGS}.add_cli_args", fair_options.extend_cli, after, s, f"{_SERVER_ARGS}.add_cli_args"),
        Hook(f"{_SERVER_ARGS}.from_cli_args", fair_options.capture_options, after, s, f"{_SERVER_ARGS}.from_cli_args"),
        Hook("sglang.srt.managers.schedule_policy.SchedulePolicy", FairSchedulePolicy, replace, s,
             f"{_SCHEDULER}.init_schedule_policy"),
        Hook(f"{_SCHEDULER}._add_request_to_queue", charging.note_queued, after, s,
             f"{_SCHEDULER}._add_request_to_queue"),
        adder,
        # A patched SGLang reaches the walk through the same two classes; this wrap stays a hook there too.
        Hook(f"{_SCHEDULER}._get_new_batch_prefill_raw", admission_gate.gate_prefill_admission, around, s),
        Hook(f"{_SCHEDULER}.process_batch_result", charging.charge_outputs, after, s,
             f"{_SCHEDULER}.process_batch_result"),
        Hook(f"{_SCHEDULER}.abort_request", charging.note_aborts, after, s, f"{_SCHEDULER}.abort_request"),
        Hook(f"{_SCHEDULER}.on_idle", charging.refresh_when_idle, before, s),
        Hook(f"{_SCHEDULER}._abort_on_queued_limit", arrival_throttle.throttle_arrivals, around, s,
             f"{_SCHEDULER}._abort_on_queued_limit"),
        Hook(f"{_TOKENIZER}._handle_abort_finish_reason", throttle_response.retry_after_header, around, s,
             f"{_TOKENIZER}._handle_abort_finish_reason"),
        Hook(f"{_HTTP}.launch_server", throttle_response.install_throttle_handler, before, s,
             f"{_HTTP}.launch_server"),
        Hook(f"{_TOKENIZER}._create_tokenized_object", validation.refuse_out_of_vocab_ids, before, s,
             f"{_TOKENIZER}._create_tokenized_object"),
        Hook(f"{_HTTP}.launch_server", validation.install_validation_handler, before, s),
        generate,
        Hook(f"{_OPENAI_BASE}.handle_request", identity.remember_openai_user, before, s,
             f"{_OPENAI_BASE}.handle_request"),
        Hook(f"{_OPENAI_BASE}.extract_routing_key", identity.openai_client_key, around, s,
             f"{_OPENAI_BASE}.extract_routing_key"),
        Hook(f"{_HTTP}._wait_and_warmup", client_keys.keyless_while_warming_up, around, s),
        Hook(f"{_HTTP}.launch_server", admin_routes.install_admin_routes, before, s),
        *settings,
        # The data-parallel router (binding/controller/router_binding.py): no patch carries it.
        Hook(f"{_SERVER_ARGS}.add_cli_args", router_options.extend_cli, after, "router"),
        Hook(f"{_SERVER_ARGS}.from_cli_args", router_options.prepare_router_args, before, "router"),
        Hook(f"{_DPC}.LoadBalanceMethod.from_str", router_binding.resolve_method, around, "router"),
        server_info,
        Hook(f"{_HTTP}.launch_server", health.install_health_check, before, "router"),
        *router_process,
        Hook(f"{_DPC}.DataParallelController.__init__", router_binding.init_controller, around, "router"),
        Hook(f"{_DPC}.DataParallelController.event_loop", router_binding.run_event_loop, around, "router"),
        Hook(f"{_SCHEDULER}.__init__", router_reports.announce_worker, after, "router"),
        Hook(_STREAMER, router_reports.report_finished, after, "router"),
        Hook(abort_sender, router_reports.report_aborted, after, "router"),
        # Inert unless the router holds requests (SGLANG_FAIR_ROUTER_LATE_BINDING).
        Hook(f"{_SCHEDULER}.get_new_batch_prefill", router_reports.report_admitted, after, "router"),
        Hook(f"{_SCHEDULER}.process_batch_result", router_reports.report_progress, after, "router"),
        # Any multi-rank CPU server, whatever its policy: SGLang binds rank threads only on AMX or arm64.
        Hook("sglang.srt.distributed.bootstrap._init_cpu_threads_env", cpu_threads.pin_rank_threads, around, "cpu"),
    ]
    if not release_before("0.5.23"):  # where a scheduler's graceful shutdown ends in this call
        table.append(Hook(f"{_SCHEDULER_MODULE}.abort_distributed_environment",
                          quiet_exit.exit_after_graceful_shutdown, after, s))
        table.append(Hook(f"{_RECEIVER}._broadcast_reqs_across_ranks", rank_clock.share_rank0_clock, around, s))
    if importlib.util.find_spec("sglang.srt.managers.tokenizer_control_mixin") is not None:
        # Info and admin calls answer within a deadline (SGLang 0.5.23's communicator table; older releases
        # build their communicators in TokenizerManager.__init__, and rely on the controller's answers).
        table.append(Hook("sglang.srt.managers.tokenizer_control_mixin.TokenizerControlMixin.init_communicators",
                          state_deadline.answer_state_calls_in_time, after, "router"))
    if importlib.util.find_spec("sglang.srt.entrypoints.api_contract") is not None:  # SGLang 0.5.23's JSON contract
        table.append(Hook(f"{_HTTP}.generate_contract_error", validation.name_the_field, around, s))
    if importlib.util.find_spec("ray") is not None:
        from sglang_fair.binding.ray import backend as ray_backend

        table += [
            Hook(f"{_RAY_ENGINE}._launch_scheduler_processes", ray_backend.join_ray, before, "ray"),
            Hook(f"{_RAY_ENGINE}._launch_dp_scheduler_processes", ray_backend.launch_on_unpublished_copy, around,
                 "ray"),
            Hook("sglang.srt.observability.cpu_monitor.start_cpu_monitor_thread",
                 ray_backend.one_cpu_monitor_per_process, around, "ray"),
            Hook("sglang.srt.ray.http_server.launch_server", throttle_response.install_throttle_handler, before, "ray"),
            Hook("sglang.srt.ray.http_server.launch_server", admin_routes.install_admin_routes, before, "ray"),
            Hook("sglang.srt.ray.http_server.launch_server", health.install_health_check, before, "ray"),
            Hook("sglang.srt.ray.http_server.launch_server", validation.install_validation_handler, before, "ray"),
        ]
        # SGLang 0.5.21's route wraps; Ray's launch_server does not call http_server's.
        table += [Hook("sglang.srt.ray.http_server.launch_server", hook.function, before, "ray", hook.patched_in)
                  for hook in (generate, server_info) if hook.target == f"{_HTTP}.launch_server"]
    return table


def hooks_to_register(patched_sglang: bool) -> list[Hook]:
    """What the plugin registers: everything, or on a patched SGLang what no patch carries."""
    return [hook for hook in hook_table() if not (patched_sglang and hook.patched_in)]
