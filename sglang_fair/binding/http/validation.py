"""Bad request input: refused at the edge, with an error that names what is wrong.

* In SGLang 0.5.23 an ``input_ids`` value outside the vocabulary reaches the
  embedding, raises there, and the scheduler process dies, failing every
  other client's requests. One tenant must not be able to do that, so such a
  request is refused up front with HTTP 400. Hook: ``refuse_out_of_vocab_ids``
  BEFORE ``TokenizerManager._create_tokenized_object`` (called once per
  request, after batches are split, on every endpoint).
* SGLang 0.5.23 checks a ``/generate`` body against its JSON contract and
  answers a type error without saying where (``invalid type: floating point
  `1.5`, expected i64``). Hook: ``name_the_field`` AROUND
  ``http_server.generate_contract_error`` finds the field and names it
  (``sampling_params.max_new_tokens: ... expected an integer``).
* SGLang's answer to a body FastAPI cannot parse carries the server's source
  path and line, and echoes the input. Hook: ``install_validation_handler``
  BEFORE ``http_server.launch_server`` answers such bodies with each error's
  field and message only (the same JSON shape, HTTP 400).
"""

from __future__ import annotations

import re
from http import HTTPStatus
from typing import Any, Callable


def refuse_out_of_vocab_ids(manager, obj, input_text, input_ids, *args, **kwargs):
    if not input_ids:
        return None
    vocab_size = manager.model_config.vocab_size
    for position, token_id in enumerate(input_ids):
        if not 0 <= token_id < vocab_size:
            # ValueError is SGLang's own "bad request" signal: HTTP 400, server unharmed.
            raise ValueError(
                f"input_ids[{position}] = {token_id} is outside the model's vocabulary [0, {vocab_size})"
            )
    return None


_RUST_TYPES = ((re.compile(r"\b[iu](8|16|32|64|128|size)\b"), "an integer"), (re.compile(r"\bf(32|64)\b"), "a number"))


def name_the_field(original: Callable[[Any], str | None], body: Any, *args, **kwargs) -> str | None:
    """The contract's error for ``body``, prefixed with the field it is about."""
    error = original(body, *args, **kwargs)
    if error is None:
        return None
    path = _culprit(body, lambda candidate: original(candidate, *args, **kwargs) == error)
    for pattern, words in _RUST_TYPES:
        error = pattern.sub(words, error)
    return f"{path}: {error}" if path else error


_MAX_PROBES = 64  # contract checks spent looking for the field; a huge body gets the error unnamed


def _culprit(body: Any, still_fails: Callable[[Any], bool]) -> str:
    """The dotted path of the smallest part of ``body`` whose removal makes the error go away
    (as far as ``_MAX_PROBES`` checks find it: each check reads the whole body)."""
    path: list[str] = []
    node, rebuild = body, (lambda replaced: replaced)
    probes = 0
    while isinstance(node, (dict, list)):
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        if probes + len(keys) > _MAX_PROBES:
            return ""
        probes += len(keys)
        for key in keys:
            without = ({k: v for k, v in node.items() if k != key} if isinstance(node, dict)
                       else [v for i, v in enumerate(node) if i != key])
            if not still_fails(rebuild(without)):
                path.append(str(key) if isinstance(node, dict) else f"[{key}]")
                rebuild = _setter(node, key, rebuild)
                node = node[key]
                break
        else:
            break
    return ".".join(path).replace(".[", "[")


def _setter(node: dict | list, key: Any, rebuild: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Rebuilds the whole body with ``node[key]`` replaced."""
    def with_child(child: Any) -> Any:
        copy = dict(node) if isinstance(node, dict) else list(node)
        copy[key] = child
        return rebuild(copy)
    return with_child


def install_validation_handler(*args, **kwargs) -> None:
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import ORJSONResponse
    from sglang.srt.entrypoints.http_server import app

    sglang_handler = app.exception_handlers.get(RequestValidationError)

    async def answer_invalid_body(request, exc: RequestValidationError):
        path = request.url.path
        if sglang_handler is not None and (path.startswith("/v1/messages") or path.endswith("/v1/systemone")):
            return await sglang_handler(request, exc)  # those envelopes hold no source path already
        message = describe_errors(exc.errors())
        if path.startswith("/v1/responses"):
            body = {"error": {"message": message, "type": HTTPStatus.BAD_REQUEST.phrase, "param": None,
                              "code": HTTPStatus.BAD_REQUEST.value}}
        else:
            body = {"object": "error", "message": message, "type": HTTPStatus.BAD_REQUEST.phrase, "param": None,
                    "code": HTTPStatus.BAD_REQUEST.value}
        return ORJSONResponse(body, status_code=HTTPStatus.BAD_REQUEST)

    app.add_exception_handler(RequestValidationError, answer_invalid_body)
    return None


def describe_errors(errors: list[dict]) -> str:
    """``text: Input should be a valid string, or a valid list``: each field (without FastAPI's
    ``body`` and the union members it tried) with its messages, never the input."""
    by_field: dict[str, list[str]] = {}
    for error in errors:
        if error.get("type") == "json_invalid":
            where = "body"
        else:
            location = [str(part) for part in error.get("loc", ()) if part != "body"]
            where = ".".join(part for part in location if not _is_type_name(part)) or "body"
        message = str(error.get("msg", "invalid"))
        if message not in by_field.setdefault(where, []):
            by_field[where].append(message)
    return "; ".join(f"{where}: {' or '.join(messages)}" for where, messages in by_field.items())


def _is_type_name(part: str) -> bool:
    """FastAPI names each union member it tried (``str``, ``list[str]``, ``dict[str,any]``)."""
    return part in {"str", "int", "float", "bool"} or "[" in part
