"""The model's vocabulary, and fitting a workload's token ids to it before anything is sent.

Workloads are synthetic token ids in ``[0, vocab_size)``; a server refuses
(or, without sglang-fair's check, crashes on) an id at or past its model's
vocabulary. SGLang does not report the vocabulary size, so it is read from
the model's ``config.json``: ``/model_info`` names the model path, which is
a local directory or a Hugging Face id already in the local cache (nothing is
downloaded). That works when the benchmark runs where the server's model
files are (``--launch``, or a server on the same machine).

The rule (docs/benchmarking.md, "Token ids and the model's vocabulary"):

* ids the benchmark generates follow the model: a scenario whose
  ``vocab_size`` is larger than the model's is generated with the model's
  vocabulary, with a notice (the same workload ``--vocab-size`` gives);
* ids the user chose are never changed: a vocabulary given on the command
  line that is larger than the model's, or a trace id outside it, is refused
  before the first request, naming both sizes.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sglang_fair.workloads.model import Workload

INFO_TIMEOUT_S = 10.0


class VocabularyMismatch(ValueError):
    """The workload's token ids do not fit the model and cannot be regenerated."""


@dataclass(frozen=True)
class ModelVocab:
    size: int | None  # None: not known
    source: str  # where it was read, or why it could not be


def config_vocab_size(model_path: str) -> int | None:
    """``vocab_size`` from a model's ``config.json`` (a directory, or a Hugging Face id in the
    local cache); None when there is no readable config. A multimodal model's text config
    wins, as in SGLang's ``ModelConfig``."""
    config = _config_file(model_path)
    if config is None:
        return None
    try:
        data = json.loads(config.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    text = data.get("text_config")
    for section in (text if isinstance(text, dict) else {}, data):
        size = section.get("vocab_size")
        if isinstance(size, int) and not isinstance(size, bool) and size > 0:
            return size
    return None


def _config_file(model_path: str) -> Path | None:
    local = Path(model_path).expanduser() / "config.json"
    if local.is_file():
        return local
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    try:
        cached = try_to_load_from_cache(model_path, "config.json")
    except ValueError:  # not a valid repository id
        return None
    return Path(cached) if isinstance(cached, str) else None


def read_model_vocab(url: str, timeout_s: float = INFO_TIMEOUT_S) -> ModelVocab:
    """The vocabulary of the model the server at ``url`` serves (``/model_info``, older name
    ``/get_model_info``, then the model's config)."""
    url = url.rstrip("/")
    # No proxy from the environment, like the replay client (aiohttp): the server is reached directly.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    info, failure = None, "it does not answer /model_info"
    for path in ("/model_info", "/get_model_info"):
        try:
            with opener.open(url + path, timeout=timeout_s) as r:
                info = json.loads(r.read())
                break
        except urllib.error.HTTPError as e:
            failure = f"GET {path} returned HTTP {e.code}"
        except (urllib.error.URLError, OSError, ValueError) as e:
            failure = f"GET {path} failed: {e}"
            break  # unreachable: the run reports it
    if not isinstance(info, dict) or not isinstance(info.get("model_path"), str):
        return ModelVocab(None, f"the server at {url}: {failure if info is None else '/model_info names no model_path'}")
    model = info["model_path"]
    size = config_vocab_size(model)
    if size is None:
        return ModelVocab(None, f"model {model}: no config.json with a vocab_size on this machine")
    return ModelVocab(size, f"model {model}")


def largest_id(workload: Workload) -> int:
    return max((max(call.tokens) for p in workload.programs for call in p.calls if call.tokens), default=-1)


def fit_to_model(workload: Workload, model: ModelVocab, *, chosen: str | None,
                 regenerate: Callable[[int], Workload] | None) -> tuple[Workload, str | None]:
    """The workload to send to a model of ``model.size`` ids, and a notice for the user (None: none).

    ``chosen``: how the user set the vocabulary on the command line (e.g. ``--vocab-size
    32000``), None when the workload's own applies. ``regenerate(size)`` builds the same
    scenario with another vocabulary; None for a trace, whose ids are the user's data.
    Raises VocabularyMismatch when the ids do not fit and must not be changed.
    """
    vocab = int(workload.meta.get("vocab_size", 0))
    if model.size is None:
        return workload, (f"could not read the model's vocabulary ({model.source}); token ids are sent "
                          f"unchecked, in [0, {vocab}): give --vocab-size N if the model has fewer ids")
    if regenerate is None:  # a trace: its ids are checked, never changed
        top = largest_id(workload)
        if top >= model.size:
            raise VocabularyMismatch(
                f"trace {workload.meta.get('source', workload.name)} has token id {top} (vocabulary {vocab}), "
                f"outside the model's vocabulary of {model.size} ids ({model.source}): give a trace whose "
                f"ids are < {model.size}" + (f", or --vocab-size {model.size} for its text prompts"
                                             if vocab > model.size else ""))
        return workload, None
    if vocab <= model.size:
        return workload, None
    if chosen is not None:
        raise VocabularyMismatch(
            f"the workload's vocabulary ({chosen}) is larger than the model's, {model.size} ids "
            f"({model.source}): its token ids would be refused; give --vocab-size {model.size} or less, or "
            f"leave it out to generate with the model's")
    fitted = regenerate(model.size)
    return fitted, (f"scenario {workload.name}: its vocabulary ({vocab}) is larger than the model's "
                    f"({model.size} ids, {model.source}); generating its token ids in [0, {model.size}), "
                    f"as --vocab-size {model.size} does")
