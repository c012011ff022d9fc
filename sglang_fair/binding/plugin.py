"""SGLang plugin entry point (``sglang.srt.plugins`` group, see pyproject.toml).

SGLang calls ``register`` in every process it starts (launcher, HTTP server,
schedulers, DP controller, detokenizer) and then applies the hooks. Set
``SGLANG_PLUGINS`` to a list without ``sglang_fair`` to turn the plugin off.
An SGLang release the binding does not support stops the process at once
(``common/version.py``), before any hook is registered.
An SGLang built with ``patches/`` applied calls the scheduler's functions from
its own source; the plugin then registers only what the patches do not carry
(``binding/hooks.py`` is the table of both).
"""

from __future__ import annotations

import logging

from sglang.srt.plugins.hook_registry import HookRegistry

logger = logging.getLogger(__name__)


def register() -> None:
    from sglang.srt.managers import schedule_policy

    from sglang_fair.binding.common.applied_hooks import record_registered
    from sglang_fair.binding.common.version import UnsupportedSGLang, check_sglang
    from sglang_fair.binding.hooks import hooks_to_register

    try:
        check_sglang()
    except UnsupportedSGLang as exc:
        # SystemExit, not an exception: SGLang logs a plugin's exceptions and runs on without it.
        raise SystemExit(f"sglang-fair: error: {exc}") from None
    patched = getattr(schedule_policy, "SGLANG_FAIR_BUILTIN", False)
    if patched:
        logger.info("sglang-fair: fair scheduling built into this SGLang (patches/); hooking what the patches do not carry")
    hooks = hooks_to_register(patched)
    for hook in hooks:
        HookRegistry.register(hook.target, hook.function, hook.kind)
    record_registered(hooks)
