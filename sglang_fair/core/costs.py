"""Cost functions: how much service a request's tokens represent.

* VTC (VTC paper §3.1): ``w_in * input + w_out * output``; cached tokens cost
  the same as computed ones.
* DLPM (DLPM paper §3): ``w_e * extend + w_q * output`` where extend excludes
  the prefix already in the cache, so a prefix is paid for once, when computed.
* Justitia (§IV-A): KV token-time, ``p*d + d*(d+1)/2``.

Output is charged token by token as it is produced; ``context_len`` (tokens in
the KV cache before the new ones) lets token-time costs price a token by the
memory it holds.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Callable, NamedTuple


class Charge(NamedTuple):
    """The service one request received in one step, handed to its policy as is.

    ``cost`` is what the cost function priced, before any client weight; a
    policy's counters take ``weighted`` (the cost divided by the client's
    weight, the one rule every weight-aware policy shares). Policies that price
    service their own way (FairServe's Eq. 3) read the tokens and the weight.
    A named tuple: one is made per progress report, and a frozen dataclass
    costs three times as much to build.
    """

    cost: float
    weight: float
    input_tokens: int = 0  # the whole prompt, at its first admission only
    output_tokens: int = 0  # generated in this step

    @property
    def weighted(self) -> float:
        return self.cost / self.weight


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


@dataclass(frozen=True)
class KVTokenTimeCost(CostFunction):
    """KV token-time (Justitia §IV-A): the KV slots a request holds, summed over its steps.

    The i-th output token is generated while ``p + i`` tokens sit in the KV
    cache, so a request with ``p`` prompt and ``d`` output tokens costs
    ``sum(p + i for i in 1..d) = p*d + d*(d+1)/2`` (the paper writes the
    continuous form ``p*d + d**2/2``). Admission costs nothing: prompt tokens
    are paid for by the steps that keep them resident. Cached prefix tokens
    are resident too, so they are charged like computed ones. The token
    weights of the linear costs do not apply.
    """

    # Context length used for the per-token price bound (``max_output_weight``).
    max_context: int = 32768

    def __post_init__(self) -> None:
        if self.max_context <= 0:
            raise ValueError(f"max_context must be > 0, got {self.max_context}")

    @property
    def name(self) -> str:  # type: ignore[override]
        return "kv-token-time"

    def admission(self, input_tokens: int, cached_tokens: int) -> float:
        return 0.0

    def output(self, new_tokens: int, context_len: int) -> float:
        # Tokens context_len+1 .. context_len+new_tokens, one step each.
        n = max(0, new_tokens)
        return float(n * context_len + n * (n + 1) // 2)

    @property
    def max_input_weight(self) -> float:
        return 0.0

    @property
    def max_output_weight(self) -> float:
        return float(self.max_context)


# name -> factory(w_input, w_output); other modules add their cost functions here.
COSTS: dict[str, Callable[[float, float], CostFunction]] = {
    "linear": lambda w_in, w_out: LinearCost(w_in, w_out, prefix_aware=False),
    "prefix-aware": lambda w_in, w_out: LinearCost(w_in, w_out, prefix_aware=True),
    "kv-token-time": lambda w_in, w_out: KVTokenTimeCost(),
}


def make_cost(name: str, w_input: float = 1.0, w_output: float = 2.0) -> CostFunction:
    """Build a cost function by name (see ``COSTS``)."""
    try:
        factory = COSTS[name]
    except KeyError:
        raise ValueError(f"unknown cost function {name!r}; choose one of {', '.join(COSTS)}") from None
    return factory(w_input, w_output)
