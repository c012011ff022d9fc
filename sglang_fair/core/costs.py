"""Cost functions: how much service a request's tokens represent.

* VTC (VTC paper §3.1): ``w_in * input + w_out * output``; cached tokens cost
  the same as computed ones.
* DLPM (DLPM paper §3): ``w_e * extend + w_q * output`` where extend excludes
  the prefix already in the cache, so a prefix is paid for once, when computed.

Output is charged token by token as it is produced; ``context_len`` (tokens in
the KV cache before the new ones) lets token-time costs price a token by the
memory it holds.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Callable


class CostFunction(ABC):
    name: str

    @abstractmethod
    def admission(self, input_tokens: int, cached_tokens: int) -> float:
        """Service charged when a request is admitted to the running batch."""

    @abstractmethod
    def output(self, new_tokens: int, context_len: int) -> float:
        """Service charged for ``new_tokens`` generated on top of ``context_len``."""

    @property
    @abstractmethod
    def max_input_weight(self) -> float:
        """Largest price of one input token (for the papers' bounds)."""

    @property
    @abstractmethod
    def max_output_weight(self) -> float:
        """Largest price of one output token at bounded context (for the bounds)."""


@dataclass(frozen=True)
class LinearCost(CostFunction):
    """``w_input * charged_input + w_output * output``.

    With ``prefix_aware`` the charged input is the extend (uncached) part only.
    """

    w_input: float = 1.0
    w_output: float = 2.0
    prefix_aware: bool = False

    def __post_init__(self) -> None:
        if self.w_input < 0:
            raise ValueError(f"input token weight must be >= 0, got {self.w_input}")
        if self.w_output < 0:
            raise ValueError(f"output token weight must be >= 0, got {self.w_output}")

    @property
    def name(self) -> str:  # type: ignore[override]
        return "prefix-aware" if self.prefix_aware else "linear"

    def admission(self, input_tokens: int, cached_tokens: int) -> float:
        charged = input_tokens - cached_tokens if self.prefix_aware else input_tokens
        return self.w_input * max(0, charged)

    def output(self, new_tokens: int, context_len: int) -> float:
        return self.w_output * new_tokens

    @property
    def max_input_weight(self) -> float:
        return self.w_input

    @property
    def max_output_weight(self) -> float:
        return self.w_output


# name -> factory(w_input, w_output); other modules add their cost functions here.
COSTS: dict[str, Callable[[float, float], CostFunction]] = {
    "linear": lambda w_in, w_out: LinearCost(w_in, w_out, prefix_aware=False),
    "prefix-aware": lambda w_in, w_out: LinearCost(w_in, w_out, prefix_aware=True),
}


def make_cost(name: str, w_input: float = 1.0, w_output: float = 2.0) -> CostFunction:
    """Build a cost function by name (see ``COSTS``)."""
    try:
        factory = COSTS[name]
    except KeyError:
        raise ValueError(f"unknown cost function {name!r}; choose one of {', '.join(COSTS)}") from None
    return factory(w_input, w_output)
