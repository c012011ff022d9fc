"""The SGLang releases this binding supports, checked before any hook is registered.

The hooks name SGLang functions and rely on their shape; on another release a
renamed or reshaped function would leave a fair policy silently unfair (or a
hook silently unapplied). So every process refuses an unsupported SGLang at
start, naming the installed and the supported releases. Operators who want
to try another release anyway set ``SGLANG_FAIR_ALLOW_UNSUPPORTED_SGLANG=1``:
the plugin then loads with a warning in every process's log.
"""

from __future__ import annotations

import functools
import importlib.metadata
import logging
import re

from sglang_fair.binding.common import settings

logger = logging.getLogger(__name__)

# Releases the engine and server tests pass on (docs/architecture.md, "Supported SGLang releases").
SUPPORTED_SGLANG = ("0.5.21", "0.5.22", "0.5.23")


class UnsupportedSGLang(RuntimeError):
    """The installed SGLang is not a release this binding supports."""


@functools.cache  # read once per process: callers include per-request refusals
def installed_sglang() -> str | None:
    try:
        return importlib.metadata.version("sglang")
    except importlib.metadata.PackageNotFoundError:
        return None


def check_sglang(version: str | None = None) -> str:
    """Return the installed SGLang version; raise ``UnsupportedSGLang`` if it is not supported."""
    version = installed_sglang() if version is None else version
    if version in SUPPORTED_SGLANG:
        return version
    found = f"SGLang {version} is installed" if version else "no SGLang is installed"
    message = (f"sglang-fair supports SGLang {', '.join(SUPPORTED_SGLANG)}, but {found}: install a supported release "
               f"(pip install sglang=={SUPPORTED_SGLANG[-1]}), or turn the plugin off (SGLANG_PLUGINS without sglang_fair)")
    if version is not None and settings.unsupported_sglang_allowed():
        logger.warning("%s; loading anyway because %s=1: fair scheduling may not work", message, settings.ALLOW_UNSUPPORTED_ENV)
        return version
    raise UnsupportedSGLang(message + f"; {settings.ALLOW_UNSUPPORTED_ENV}=1 loads it anyway, untested")


def _release(version: str) -> tuple[int, ...]:
    """``"0.5.22"`` -> (0, 5, 22); a suffix (``rc1``, ``.post1``, ``+cpu``) does not count."""
    return tuple(int(part) for part in re.findall(r"\d+", version.split("+")[0])[:3])


def release_before(release: str, version: str | None = None) -> bool:
    """Whether the installed SGLang (or ``version``) is a release older than ``release``."""
    version = installed_sglang() if version is None else version
    return version is not None and _release(version) < _release(release)


def sends_aborts_inline(version: str | None = None) -> bool:
    """True for SGLang before 0.5.23, whose scheduler sends abort answers through its tokenizer
    socket inline rather than through ``Scheduler.send_abort_output``."""
    return release_before("0.5.23", version)
