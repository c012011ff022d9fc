"""How long a simulated GPU takes for a prefill (extend) batch and a decode step.

Two fitted formulas, in milliseconds:

* prefill of requests i with ``new_i`` uncached and ``cached_i`` cached tokens:
  ``a + b * max(sum(new_i), knee) + sum_i(c * cached_i + e * new_i * cached_i + d * new_i**2)``.
  Below ``knee`` tokens the GPU is not saturated (the time barely moves);
  ``e`` is attention over the cached context, ``d`` attention within the new
  tokens, ``c`` the per-cached-token cost of reading the prefix.
* decode step: ``a + b * batch + c * context_tokens`` (all running requests'
  context, i.e. the KV the attention kernel reads).

A profile holds the coefficients plus the box of measurements it was fitted
on; calls outside that box still get a time but are counted as
extrapolations so a run can say how much of it rests on guesses.
Profiles are JSON files in ``sglang_fair/sim/profiles/`` (``fit.py`` writes
them from a calibration file).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

PROFILE_DIR = Path(__file__).parent / "profiles"


class ProfileError(ValueError):
    """A profile that does not exist or cannot be used."""


@dataclass(frozen=True)
class PrefillFit:
    a: float
    b: float
    c: float
    d: float
    e: float
    knee: int
    max_new: int  # fitted range: largest single-request extend measured
    max_cached: int


@dataclass(frozen=True)
class DecodeFit:
    a: float
    b: float
    c: float
    max_batch: int
    max_context: int  # per request


@dataclass
class Profile:
    name: str
    model: str
    gpu: str
    prefill: PrefillFit
    decode: DecodeFit
    kv_pool_tokens: int  # default KV pool size on that GPU (estimate, see docs)
    source: str = ""
    fit_error: dict = field(default_factory=dict)  # row kind -> {"median": .., "max": .., "rows": ..}

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, raw: dict) -> Profile:
        try:
            return cls(
                name=raw["name"], model=raw["model"], gpu=raw["gpu"],
                prefill=PrefillFit(**raw["prefill"]), decode=DecodeFit(**raw["decode"]),
                kv_pool_tokens=int(raw["kv_pool_tokens"]), source=raw.get("source", ""),
                fit_error=raw.get("fit_error", {}),
            )
        except (KeyError, TypeError) as e:
            raise ProfileError(f"malformed profile {raw.get('name', '?')!r}: {e}") from None


def available_profiles() -> list[str]:
    return sorted(p.stem for p in PROFILE_DIR.glob("*.json"))


def load_profile(name_or_path: str) -> Profile:
    """A profile by name (``sglang_fair/sim/profiles/<name>.json``) or by file path."""
    path = Path(name_or_path)
    if not path.suffix == ".json":
        path = PROFILE_DIR / f"{name_or_path}.json"
    if not path.is_file():
        raise ProfileError(
            f"unknown simulator profile {name_or_path!r}; choose one of {', '.join(available_profiles())} "
            "or give the path of a profile JSON (see docs/simulator.md to fit one)"
        )
    return Profile.from_json(json.loads(path.read_text()))


class CostModel:
    """Times batches with a profile and counts extrapolated calls."""

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        self.extrapolated = {"prefill": 0, "decode": 0}

    def prefill_ms(self, batch: list[tuple[int, int]]) -> float:
        """``batch``: (new_tokens, cached_tokens) per request in the prefill batch."""
        p = self.profile.prefill
        total_new = 0
        per_request = 0.0
        out_of_range = False
        for new, cached in batch:
            total_new += new
            per_request += p.c * cached + p.e * new * cached + p.d * new * new
            out_of_range = out_of_range or new > p.max_new or cached > p.max_cached
        if out_of_range:
            self.extrapolated["prefill"] += 1
        return p.a + p.b * max(total_new, p.knee) + per_request

    def decode_ms(self, batch: int, context_tokens: int) -> float:
        """One decode step of ``batch`` requests holding ``context_tokens`` in all."""
        return self.decode_steps_ms(batch, context_tokens, 1)

    def mixed_decode_ms(self, batch: int, context_tokens: int) -> float:
        """What ``batch`` decode rows add to a prefill forward they are mixed into (SGLang's
        ``--enable-mixed-chunk``): one decode step without its fixed cost, which the forward
        already pays. An estimate: the profiles hold no mixed step."""
        d = self.profile.decode
        return self.decode_ms(batch, context_tokens) - d.a

    def decode_steps_ms(self, batch: int, context_tokens: int, steps: int) -> float:
        """``steps`` decode steps of a constant batch; context grows by ``batch`` a step."""
        d = self.profile.decode
        last = context_tokens + batch * (steps - 1)
        if batch > d.max_batch or last > d.max_context * batch:
            self.extrapolated["decode"] += steps  # counted per step, conservatively
        return self.decode_series_ms(batch, context_tokens, steps)

    def decode_series_ms(self, batch: int, context_tokens: int, steps: int) -> float:
        """What ``decode_steps_ms`` charges, without counting extrapolations (for statistics)."""
        d = self.profile.decode
        first = d.a + d.b * batch + d.c * context_tokens
        return steps * first + d.c * batch * steps * (steps - 1) / 2  # arithmetic series
