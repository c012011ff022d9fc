"""Identities clients cannot forge: ``--fair-client-keys FILE`` maps API keys to client ids.

Without it the client id is whatever the caller claims (``X-Client-Id``, the
OpenAI ``user`` field, a body ``routing_key``), which suits a trusted gateway
in front of the server. With it, every request must carry one of the keys,
as ``Authorization: Bearer KEY`` (what OpenAI clients send for ``api_key``)
or ``X-Api-Key: KEY``; the request is charged to the client the key belongs
to, whatever else it claims, and a missing or unknown key gets HTTP 401.

The file is YAML (or JSON): client id -> key, or a list of keys::

    alice: sk-alice-3f9c1e2a7b
    bob: [sk-bob-8d41aa0c2e, sk-bob-ci-77e0b1d943]

Ids follow the client-id rules (1-64 characters of ``[A-Za-z0-9._@-]``), keys
are at least 16 characters, and no key may belong to two clients. The
launcher checks the file and exports its path in ``SGLANG_FAIR_CLIENT_KEYS``
for the HTTP server (the same process); SGLang's own ``--api-key`` (one key
for everybody) cannot be combined with it.
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

import yaml

from sglang_fair.binding.common import settings
from sglang_fair.core.clients import normalize_client_id

MIN_KEY_LENGTH = 16


class ClientKeyError(ValueError):
    """The key file is unreadable or malformed (the message names the file and entry)."""


def load_keys(path: str | os.PathLike) -> dict[str, str]:
    """key -> client id, from the file at ``path``."""
    where = str(path)
    try:
        data = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise ClientKeyError(f"--fair-client-keys {where}: cannot read it ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise ClientKeyError(f"--fair-client-keys {where}: not valid YAML ({exc})") from None
    if not isinstance(data, dict) or not data:
        raise ClientKeyError(f"--fair-client-keys {where}: expected a mapping of client id -> key(s)")
    keys: dict[str, str] = {}
    for client, value in data.items():
        if not isinstance(client, str) or normalize_client_id(client) != client:  # kept as is: a literal id
            raise ClientKeyError(f"--fair-client-keys {where}: client id {client!r} must be 1-64 characters "
                                 "of A-Z a-z 0-9 . _ @ -")
        for key in value if isinstance(value, list) else [value]:
            if not isinstance(key, str) or len(key) < MIN_KEY_LENGTH or key != key.strip():
                raise ClientKeyError(f"--fair-client-keys {where}: {client}'s keys must be strings of at least "
                                     f"{MIN_KEY_LENGTH} characters without surrounding spaces")
            if key in keys:
                raise ClientKeyError(f"--fair-client-keys {where}: a key of {client} also belongs to {keys[key]}")
            keys[key] = client
    return keys


def export(path: str) -> None:
    """Launcher side: check the file, then let the HTTP server find it."""
    load_keys(path)
    settings.export_client_keys(str(Path(path).resolve()))


def configured() -> bool:
    return settings.client_keys_path() is not None


# SGLang's own start-up requests (its warmup) carry no key; they are let in, charged to
# ``default``, only while SGLang is warming up, before the server reports ready.
_warming_up = False


@functools.cache
def _digests(path: str) -> dict[bytes, str]:
    # Looked up by digest: no key is compared byte by byte with what a caller sent.
    return {_digest(key): client for key, client in load_keys(path).items()}


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()


def authenticated_client(headers) -> str:
    """The client whose key ``headers`` carry; HTTP 401 when there is none or it is unknown."""
    import fastapi

    token = headers.get("x-api-key")
    if token is None:
        scheme, _, value = (headers.get("authorization") or "").partition(" ")
        token = value.strip() if scheme.lower() == "bearer" else None
    if not token:
        if _warming_up:
            return "default"
        raise fastapi.HTTPException(status_code=401, detail="an API key is required (Authorization: Bearer KEY)",
                                    headers={"WWW-Authenticate": "Bearer"})
    client = _digests(settings.client_keys_path() or "").get(_digest(token))
    if client is None:
        raise fastapi.HTTPException(status_code=401, detail="unknown API key", headers={"WWW-Authenticate": "Bearer"})
    return client


def keyless_while_warming_up(original, *args, **kwargs):
    """AROUND ``http_server._wait_and_warmup``: SGLang's warmup request carries no key."""
    global _warming_up
    _warming_up = configured()
    try:
        return original(*args, **kwargs)
    finally:
        _warming_up = False
