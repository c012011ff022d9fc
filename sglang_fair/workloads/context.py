"""What every generator gets: seeded randomness, vocabulary, shared helpers."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from sglang_fair.core import checks
from sglang_fair.workloads.arrivals import fixed_count_times
from sglang_fair.workloads.spec import ClientSpec
from sglang_fair.workloads.tokens import SyntheticTokenizer, random_ids


@dataclass
class GenContext:
    seed: int
    vocab_size: int
    tokenizer: SyntheticTokenizer = field(init=False)

    def __post_init__(self) -> None:
        self.tokenizer = SyntheticTokenizer(self.vocab_size)

    def rng(self, *keys: object) -> random.Random:
        """An RNG for one named stream; string seeds are hashed (SHA-512) by
        ``random``, so each stream is stable across runs and independent of
        the others (adding a client does not change the other clients)."""
        return random.Random("/".join([str(self.seed), *map(str, keys)]))

    def ids(self, rng: random.Random, n: int) -> tuple[int, ...]:
        return random_ids(rng, n, self.vocab_size)

    def arrivals(self, client: ClientSpec) -> list[float]:
        return fixed_count_times(self.rng("arrivals", client.name), client.num_programs, client.rate,
                                 client.arrival, client.cv)


def draw_length(rng: random.Random, mean: float, cv: float = 0.0, low: int = 1) -> int:
    """A token count with the given mean and coefficient of variation (Gamma)."""
    if cv <= 0:
        return max(low, round(mean))
    shape = 1.0 / (cv * cv)
    return max(low, round(rng.gammavariate(shape, mean / shape)))


def positive(name: str, value: float, integer: bool = True, allow_zero: bool = False) -> None:
    """Raise ValueError unless ``value`` is a positive (or non-negative) number."""
    checks.at_least(name, value, 0, integer=integer, strict=not allow_zero)
