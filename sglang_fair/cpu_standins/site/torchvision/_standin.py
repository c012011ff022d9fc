"""Placeholders behind the import-only torchvision stand-in.

SGLang imports torchvision at module level for multimodal models that a CPU
test server never runs. Every name resolves to a placeholder so those imports
succeed; using one raises NotImplementedError naming it. Attribute access on a
placeholder (`InterpolationMode.BICUBIC` in a default argument) yields another
placeholder, so module bodies that merely mention such names still import.
"""

from __future__ import annotations

from typing import Any, NoReturn

_WHY = (
    "is not available: this torchvision is sglang-fair's import-only CPU "
    "stand-in (sglang_fair/cpu_standins), not the real package"
)


class Unavailable:
    """A named placeholder that fails loudly when used."""

    def __init__(self, qualname: str) -> None:
        self._qualname = qualname

    def __getattr__(self, name: str) -> "Unavailable":
        if name.startswith("__"):
            raise AttributeError(name)
        return Unavailable(f"{self._qualname}.{name}")

    def __call__(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise NotImplementedError(f"{self._qualname} {_WHY}")

    def __repr__(self) -> str:
        return f"<unavailable {self._qualname}>"


def module_getattr(module_name: str):
    """Build a PEP 562 module `__getattr__` that hands out placeholders."""

    def __getattr__(name: str) -> Unavailable:
        # Dunder probes (__version__, __path__, __all__...) must fail normally,
        # or import machinery and version checks would be misled.
        if name.startswith("__"):
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        return Unavailable(f"{module_name}.{name}")

    return __getattr__
