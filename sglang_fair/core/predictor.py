"""Demand prediction per application type from its first prompt (Justitia §IV-B).

History is a list of ``DemandSample`` (application type, first prompt, total
cost of the run). For each type with at least ``min_samples`` samples,
``fit`` trains a light regressor: TF-IDF features of the prompt (word
uni/bi-grams for text, token-id uni/bi-grams for token ids) plus the log of
the standardized log prompt length (TF-IDF vectors are length-normalized, and
length is a strong demand signal), then an MLP with two hidden layers (4
layers in all, as in the paper) and L2 regularization, fitted with L-BFGS
(suited to the paper's ~100 samples per type) to the standardized log(1 + cost).
Training runs BLAS on one thread: on a shared host, oversubscribed threads
made it 10-100x slower.

``predict`` uses the type's model when there is one, else the type's mean
cost, else the mean over all types once ``min_samples`` runs were seen, else
the caller's fallback (else the mean over the few runs seen). Means are
updated online by ``observe``; models change only on ``fit`` (startup, from a
recorded history file), so the scheduler never trains on its hot path.

scikit-learn is optional: without it ``fit`` trains nothing and prediction is
the per-type mean.
"""

from __future__ import annotations

import json
import math
import warnings
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

MAX_TYPES = 1024  # bound on per-type state, whatever ids clients send
# Only the start of a prompt is kept and featurized (plus its full length), so
# history memory is bounded however long prompts are.
MAX_PROMPT_TOKENS = 2048
MAX_PROMPT_CHARS = 16384


@dataclass(frozen=True)
class DemandSample:
    app: str
    prompt: tuple[int, ...] | str  # truncated, see MAX_PROMPT_TOKENS
    length: int  # full prompt length (tokens, or words for text)
    cost: float


def truncate_prompt(prompt: Sequence[int] | str | None) -> tuple[int, ...] | str:
    if prompt is None:
        return ()
    if isinstance(prompt, str):
        return prompt[:MAX_PROMPT_CHARS]
    return tuple(int(t) for t in prompt[:MAX_PROMPT_TOKENS])


def prompt_document(prompt: Sequence[int] | str | None) -> str:
    """The text TF-IDF sees: the prompt itself, or token ids as words ``t<id>``."""
    if prompt is None:
        return ""
    if isinstance(prompt, str):
        return prompt
    return " ".join(f"t{int(t)}" for t in prompt)


def prompt_length(prompt: Sequence[int] | str | None) -> int:
    if prompt is None:
        return 0
    return len(prompt.split()) if isinstance(prompt, str) else len(prompt)


@dataclass
class _TypeStats:
    count: int = 0
    mean: float = 0.0
    samples: deque = field(default_factory=deque)


class DemandPredictor:
    def __init__(
        self,
        min_samples: int = 20,
        max_samples: int = 2000,
        hidden: tuple[int, ...] = (32, 16),
        l2: float = 1.0,
        max_features: int = 128,
        seed: int = 0,
    ) -> None:
        if min_samples < 2:
            raise ValueError(f"min_samples must be >= 2, got {min_samples}")
        self.min_samples = min_samples
        self.max_samples = max_samples
        self.hidden = hidden
        self.l2 = l2
        self.max_features = max_features
        self.seed = seed
        self._types: dict[str, _TypeStats] = {}
        self._models: dict[str, object] = {}
        self._total = 0
        self._total_mean = 0.0

    # -- history ---------------------------------------------------------------
    def observe(
        self, app: str, prompt: Sequence[int] | str | None, cost: float, length: int | None = None
    ) -> None:
        """A run of ``app`` that started with ``prompt`` cost ``cost`` in all.

        ``length``: the full prompt length, when ``prompt`` is already cut."""
        if not math.isfinite(cost) or cost < 0:
            raise ValueError(f"observed cost must be a finite number >= 0, got {cost!r}")
        if length is None:
            length = prompt_length(prompt)
        elif not isinstance(length, int) or length < 0:
            raise ValueError(f"prompt length must be an integer >= 0, got {length!r}")
        stats = self._types.get(app)
        if stats is None:
            if len(self._types) >= MAX_TYPES:
                return
            stats = self._types[app] = _TypeStats(samples=deque(maxlen=self.max_samples))
        stats.count += 1
        stats.mean += (cost - stats.mean) / stats.count
        self._total += 1
        self._total_mean += (cost - self._total_mean) / self._total
        stats.samples.append(DemandSample(app, truncate_prompt(prompt), length, float(cost)))

    def samples(self) -> list[DemandSample]:
        return [s for stats in self._types.values() for s in stats.samples]

    # -- models ----------------------------------------------------------------
    def fit(self) -> dict[str, int]:
        """Train one model per type with enough samples; returns type -> samples used."""
        try:
            from sklearn.feature_extraction.text import TfidfVectorizer
            from threadpoolctl import threadpool_limits
        except ImportError:
            return {}
        trained = {}
        with threadpool_limits(1), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # L-BFGS iteration-cap notices
            for app, stats in self._types.items():
                if len(stats.samples) < self.min_samples:
                    continue
                docs = [prompt_document(s.prompt) for s in stats.samples]
                vectorizer = TfidfVectorizer(
                    token_pattern=r"\S+", ngram_range=(1, 2), max_features=self.max_features, sublinear_tf=True
                )
                try:
                    tfidf = vectorizer.fit_transform(docs)
                except ValueError:  # empty vocabulary: every prompt empty
                    continue
                raw_lengths = [math.log1p(s.length) for s in stats.samples]
                raw_targets = [math.log1p(s.cost) for s in stats.samples]
                lengths, targets = _Standardizer(raw_lengths), _Standardizer(raw_targets)
                model = self._new_model()
                model.fit(_with_length(tfidf, lengths.apply(raw_lengths)), targets.apply(raw_targets))
                self._models[app] = (vectorizer, model, lengths, targets)
                trained[app] = len(stats.samples)
        return trained

    def _new_model(self):
        from sklearn.neural_network import MLPRegressor

        return MLPRegressor(
            hidden_layer_sizes=self.hidden, alpha=self.l2, solver="lbfgs", max_iter=300, random_state=self.seed
        )

    def predict(
        self, app: str | None, prompt: Sequence[int] | str | None, fallback: Callable[[], float] | None = None
    ) -> float:
        """Predicted total cost of a run of ``app`` starting with ``prompt``."""
        if app is not None and app in self._models:
            vectorizer, model, lengths, targets = self._models[app]
            length = lengths.apply([math.log1p(prompt_length(prompt))])
            tfidf = vectorizer.transform([prompt_document(truncate_prompt(prompt))])
            value = targets.invert(float(model.predict(_with_length(tfidf, length))[0]))
            return max(0.0, math.expm1(min(value, 700.0)))
        stats = self._types.get(app) if app is not None else None
        if stats is not None and stats.count:
            return stats.mean
        # Other types' mean only once it rests on min_samples runs: a server's first runs (SGLang's
        # warm-up request among them) say less about a new type than the caller's fallback does.
        if self._total >= self.min_samples or (self._total and fallback is None):
            return self._total_mean
        return fallback() if fallback is not None else 0.0

    def has_model(self, app: str) -> bool:
        return app in self._models

    # -- files -----------------------------------------------------------------
    def load_history(self, path: str) -> int:
        """Add samples from a JSONL file of ``{"app", "prompt", "cost"}`` (and
        optionally ``"length"``, the full prompt length when ``prompt`` was cut);
        returns how many."""
        count = 0
        with open(path, encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                    app, prompt, cost = rec["app"], rec["prompt"], float(rec["cost"])
                    if not isinstance(app, str) or not isinstance(prompt, (str, list)):
                        raise TypeError("app must be a string and prompt a string or a list of token ids")
                    self.observe(app, prompt, cost, rec.get("length"))
                except (ValueError, KeyError, TypeError) as exc:
                    raise ValueError(f"{path}:{lineno}: bad demand record: {exc}") from None
                count += 1
        return count

    def save_history(self, path: str) -> None:
        with open(path, "w", encoding="utf-8") as f:
            for s in self.samples():
                prompt = s.prompt if isinstance(s.prompt, str) else list(s.prompt)
                f.write(json.dumps({"app": s.app, "prompt": prompt, "length": s.length, "cost": s.cost}) + "\n")


class _Standardizer:
    """Zero mean, unit variance, fitted on ``values``."""

    def __init__(self, values: list[float]) -> None:
        self.center = sum(values) / len(values)
        self.scale = (sum((v - self.center) ** 2 for v in values) / len(values)) ** 0.5 or 1.0

    def apply(self, values: list[float]) -> list[float]:
        return [(v - self.center) / self.scale for v in values]

    def invert(self, value: float) -> float:
        return value * self.scale + self.center


def _with_length(tfidf, lengths: list[float]):
    from scipy.sparse import csr_matrix, hstack

    return hstack([tfidf, csr_matrix([[n] for n in lengths])], format="csr")
