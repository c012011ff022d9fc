"""Per-policy settings from ``FairOptions.policy_config`` (a YAML path or a mapping).

One file can hold several policies' sections (``fairserve:``, ``justitia:``);
each policy reads its own and rejects keys it does not know, so a typo fails
at startup with the file and key named instead of being silently ignored.
"""

from __future__ import annotations

from typing import Any

import yaml

from sglang_fair.core import checks
from sglang_fair.core.errors import OptionError
from sglang_fair.core.options import FairOptions



def load_policy_config(raw: str | dict | None) -> tuple[dict[str, Any], str]:
    """The whole policy config as a mapping of sections, and where it came from."""
    where = "--fair-policy-config"
    if raw is None:
        return {}, where
    if isinstance(raw, str):
        where = raw
        try:
            with open(raw, encoding="utf-8") as f:
                raw = yaml.safe_load(f) or {}
        except OSError as exc:
            raise OptionError(f"--fair-policy-config: cannot read {where}: {exc}") from None
        except yaml.YAMLError as exc:
            raise OptionError(f"--fair-policy-config: {where} is not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise OptionError(f"{where}: expected a mapping of policy sections, got {type(raw).__name__}")
    return raw, where


def policy_section(options: FairOptions, section: str, known: set[str]) -> tuple[dict[str, Any], str]:
    """The ``section`` mapping of the policy config (empty if none) and where it came from."""
    raw, where = load_policy_config(options.policy_config)
    body = raw.get(section) or {}
    if not isinstance(body, dict):
        raise OptionError(f"{where}: section {section!r} must be a mapping")
    unknown = set(body) - known
    if unknown:
        raise OptionError(f"{where}: unknown keys in {section!r}: {sorted(unknown)}; known: {sorted(known)}")
    return body, where


def number(body: dict, key: str, default: float | None, where: str, *, minimum: float = 0.0, strict: bool = False) -> float | None:
    """``body[key]`` as a finite number >= minimum (> minimum if strict), or ``default``."""
    value = body.get(key, default)
    return None if value is None else checks.at_least(f"{where}: {key}", value, minimum, strict=strict)
