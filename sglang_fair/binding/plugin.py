"""SGLang plugin entry point (``sglang.srt.plugins`` group, see pyproject.toml).

SGLang calls ``register`` in every process it starts (launcher, HTTP server,
schedulers, DP controller, detokenizer) and then applies the hooks. Set
``SGLANG_PLUGINS`` to a list without ``sglang_fair`` to turn the plugin off.
An SGLang release the binding does not support stops the process at once
(``binding/version.py``), before any hook is registered.
An SGLang built with ``patches/`` applied calls the scheduler's functions from
its own source; the plugin then registers only what the patches do not carry
(the data-parallel router and the Ray backend).
"""

from __future__ import annotations

import importlib.util
import logging

from sglang.srt.plugins.hook_registry import HookRegistry, HookType

logger = logging.getLogger(__name__)

_SCHEDULER = "sglang.srt.managers.scheduler.Scheduler"
_OPENAI_BASE = "sglang.srt.entrypoints.openai.serving_base.OpenAIServingBase"


def register() -> None:
    from sglang.srt.managers import schedule_policy

    from sglang_fair.binding.version import UnsupportedSGLang, check_sglang

    try:
        check_sglang()
    except UnsupportedSGLang as exc:
        # SystemExit, not an exception: SGLang logs a plugin's exceptions and runs on without it.
        raise SystemExit(f"sglang-fair: error: {exc}") from None
    if getattr(schedule_policy, "SGLANG_FAIR_BUILTIN", False):
        logger.info("sglang-fair: fair scheduling built into this SGLang (patches/); hooking the router only")
    else:
        _register_scheduler_hooks()
    _register_router_hooks()


def _register_scheduler_hooks() -> None:
    from sglang_fair.binding import cli, identity, scheduler_hooks, validation
    from sglang_fair.binding.schedule_policy import FairSchedulePolicy

    hooks = [
        ("sglang.srt.server_args.ServerArgs.add_cli_args", cli.extend_cli, HookType.AFTER),
        ("sglang.srt.server_args.ServerArgs.from_cli_args", cli.capture_options, HookType.AFTER),
        ("sglang.srt.managers.schedule_policy.SchedulePolicy", FairSchedulePolicy, HookType.REPLACE),
        (f"{_SCHEDULER}._add_request_to_queue", scheduler_hooks.note_queued, HookType.AFTER),
        (f"{_SCHEDULER}.get_prefill_adder_class", scheduler_hooks.fair_prefill_adder, HookType.AFTER),
        (f"{_SCHEDULER}._get_new_batch_prefill_raw", scheduler_hooks.gate_prefill_admission, HookType.AROUND),
        (f"{_SCHEDULER}.process_batch_result", scheduler_hooks.charge_outputs, HookType.AFTER),
        (f"{_SCHEDULER}.abort_request", scheduler_hooks.note_aborts, HookType.AFTER),
        (f"{_SCHEDULER}.on_idle", scheduler_hooks.refresh_when_idle, HookType.BEFORE),
        (f"{_SCHEDULER}._abort_on_queued_limit", scheduler_hooks.throttle_arrivals, HookType.AROUND),
        ("sglang.srt.managers.tokenizer_manager.TokenizerManager._handle_abort_finish_reason",
         scheduler_hooks.retry_after_header, HookType.AROUND),
        ("sglang.srt.entrypoints.http_server.launch_server", scheduler_hooks.install_throttle_handler, HookType.BEFORE),
        ("sglang.srt.managers.tokenizer_manager.TokenizerManager._create_tokenized_object",
         validation.refuse_out_of_vocab_ids, HookType.BEFORE),
        ("sglang.srt.entrypoints.http_server.serve_generate_request",
         identity.client_from_generate_headers, HookType.BEFORE),
        (f"{_OPENAI_BASE}.handle_request", identity.remember_openai_user, HookType.BEFORE),
        (f"{_OPENAI_BASE}.extract_routing_key", identity.openai_client_key, HookType.AROUND),
    ]
    for target, hook, kind in hooks:
        HookRegistry.register(target, hook, kind)


def _register_router_hooks() -> None:
    from sglang_fair.binding import dp_controller

    dp_controller.register_hooks()
    if importlib.util.find_spec("ray") is not None:  # SGLang's --use-ray backend needs it
        from sglang_fair.binding import ray_backend

        ray_backend.register_hooks()
