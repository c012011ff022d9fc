"""Application identity and expected token profiles (FairServe §4.3, Justitia §IV-B).

Terms used throughout the project:

* **application** (``app``): a type of LLM program, e.g. ``summarize``; each
  has a normal range of input, system-prompt and output tokens per stage.
* **interaction**: one run of an application for one user query, a graph of
  LLM calls (FairServe's "interaction", Justitia's "application" instance).
  Interaction ids are scoped by client, so a client cannot join another's.
* **stage**: a call's position in its interaction (0 = first call).

A ``ProfileBook`` gives the expected tokens of a call of application ``a`` at
stage ``j`` (FairServe's N̄_I^aj, N̄_S^aj, N̄_O^aj): from configured profiles
(YAML), else learned online as running means, else the default profile.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sglang_fair.core.clients import normalize_client_id

# Learned profiles are kept for at most this many applications, so hostile
# app ids cannot grow memory; further apps use the default profile.
MAX_LEARNED_APPS = 1024
MAX_STAGES = 64


def normalize_app_id(raw: object) -> str | None:
    """Application or interaction id from a raw header value; None when missing.

    Same bounding rule as client ids (see ``core.clients``).
    """
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    return normalize_client_id(raw)


@dataclass(frozen=True)
class TokenProfile:
    """Expected tokens of one call: user input, system prompt, output."""

    input: float
    system: float = 0.0
    output: float = 0.0

    def __post_init__(self) -> None:
        for name in ("input", "system", "output"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or value != value or value < 0 or value == float("inf"):
                raise ValueError(f"token profile {name} must be a finite number >= 0, got {value!r}")
        if self.input + self.system + self.output <= 0:
            raise ValueError("token profile must expect at least one token")

    def weighted(self, alpha: float, beta: float, gamma: float) -> float:
        """FairServe's w_aj = alpha*N_I + beta*N_S + gamma*N_O (Eq. 2)."""
        return alpha * self.input + beta * self.system + gamma * self.output


@dataclass
class _RunningMean:
    count: int = 0
    input: float = 0.0
    system: float = 0.0
    output: float = 0.0

    def add(self, input_tokens: int, system_tokens: int, output_tokens: int) -> None:
        self.count += 1
        k = 1.0 / self.count
        self.input += (input_tokens - self.input) * k
        self.system += (system_tokens - self.system) * k
        self.output += (output_tokens - self.output) * k

    def profile(self) -> TokenProfile | None:
        if self.count == 0 or self.input + self.system + self.output <= 0:
            return None
        return TokenProfile(self.input, self.system, self.output)


@dataclass
class ProfileBook:
    """Expected token profiles per (application, stage).

    ``configured[app]`` lists profiles by stage; a stage past the end uses the
    last one. Unconfigured apps use learned running means (when ``learn``) and
    otherwise ``default``.
    """

    default: TokenProfile = field(default_factory=lambda: TokenProfile(512.0, 0.0, 128.0))
    configured: dict[str, list[TokenProfile]] = field(default_factory=dict)
    learn: bool = True
    _learned: dict[tuple[str, int], _RunningMean] = field(default_factory=dict, repr=False)
    _learned_apps: set[str] = field(default_factory=set, repr=False)

    def expected(self, app: str | None, stage: int | None) -> TokenProfile:
        j = min(stage or 0, MAX_STAGES - 1)
        if app is not None:
            stages = self.configured.get(app)
            if stages:
                return stages[min(j, len(stages) - 1)]
            learned = self._learned_profile(app, j)
            if learned is not None:
                return learned
        return self.default

    def _learned_profile(self, app: str, stage: int) -> TokenProfile | None:
        # The exact stage if seen, else the nearest earlier stage seen.
        for j in range(stage, -1, -1):
            mean = self._learned.get((app, j))
            if mean is not None and (p := mean.profile()) is not None:
                return p
        return None

    def observe(self, app: str | None, stage: int | None, input_tokens: int, system_tokens: int, output_tokens: int) -> None:
        """Record a finished call's actual tokens (ignored for configured apps)."""
        if not self.learn or app is None or app in self.configured:
            return
        if app not in self._learned_apps:
            if len(self._learned_apps) >= MAX_LEARNED_APPS:
                return
            self._learned_apps.add(app)
        key = (app, min(stage or 0, MAX_STAGES - 1))
        self._learned.setdefault(key, _RunningMean()).add(input_tokens, system_tokens, output_tokens)

    @classmethod
    def from_config(cls, apps: dict | None, default: dict | None = None, learn: bool = True) -> ProfileBook:
        """Build from the ``apps`` mapping of a policy config (see configs/fairserve_profiles.yaml)."""
        book = cls(learn=learn)
        if default is not None:
            book.default = _profile("default", default)
        for app, spec in (apps or {}).items():
            if not isinstance(spec, dict) or not isinstance(spec.get("stages"), list) or not spec["stages"]:
                raise ValueError(f"apps.{app}: expected a mapping with a non-empty 'stages' list")
            name = normalize_app_id(app)
            if name is None:
                raise ValueError(f"apps: empty application name {app!r}")
            book.configured[name] = [_profile(f"apps.{app}.stages[{i}]", s) for i, s in enumerate(spec["stages"])]
        return book


def _profile(where: str, spec: object) -> TokenProfile:
    if not isinstance(spec, dict):
        raise ValueError(f"{where}: expected a mapping with input/system/output, got {spec!r}")
    unknown = set(spec) - {"input", "system", "output"}
    if unknown:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)}; expected input, system, output")
    try:
        return TokenProfile(float(spec.get("input", 0)), float(spec.get("system", 0)), float(spec.get("output", 0)))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: {exc}") from None
