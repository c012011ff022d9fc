"""What a hook is, which hooks the plugin registered in this process, and which of them SGLang applied.

The table itself (``binding/hooks.py``) names functions of every process's
package; this record lets a scheduler check its own hooks without importing
that table (``scheduler/schedule_policy.py`` refuses to start a fair policy
that SGLang could not hook: HookRegistry logs such a failure and goes on).
"""

from __future__ import annotations

import pkgutil
from collections.abc import Callable
from dataclasses import dataclass

from sglang.srt.plugins import hook_registry
from sglang.srt.plugins.hook_registry import HookType

_REGISTRY_FILE = hook_registry.__file__
_registered: list[Hook] = []


@dataclass(frozen=True)
class Hook:
    target: str  # the SGLang function or class, as HookRegistry resolves it
    function: Callable
    kind: HookType
    side: str  # "scheduler" (fair policies), "router" (--dp), "ray" (--use-ray) or "cpu" (ranks on CPU cores)
    patched_in: str | None = None  # the SGLang function patches/ changes to carry it


def record_registered(hooks: list[Hook]) -> None:
    """The plugin's note of what it registered in this process."""
    _registered[:] = hooks


def registered(side: str, target_prefix: str = "") -> list[Hook]:
    """The hooks registered in this process for ``side`` whose target starts with ``target_prefix``."""
    return [hook for hook in _registered if hook.side == side and hook.target.startswith(target_prefix)]


def unapplied(hooks: list[Hook]) -> list[str]:
    """Targets of ``hooks`` that SGLang has not wrapped (or replaced) in this process."""
    missing = []
    for hook in hooks:
        try:
            current = pkgutil.resolve_name(hook.target)
        except (ImportError, AttributeError):
            missing.append(hook.target)
            continue
        if hook.kind is HookType.REPLACE:
            applied = current is hook.function
        else:  # HookRegistry's wrapper, not merely some decorator of SGLang's own
            applied = getattr(getattr(current, "__code__", None), "co_filename", "") == _REGISTRY_FILE
        if not applied:
            missing.append(hook.target)
    return missing
