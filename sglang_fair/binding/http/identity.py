"""Client identity at the HTTP edge: which client a request is charged to.

SGLang carries ``routing_key`` from the HTTP request to the scheduler's
``Req`` untouched (it does not alter radix keys), so we put the client id
there:

* native ``/generate``: header ``X-Client-Id``, else the body's ``routing_key``,
  else header ``x-smg-routing-key`` (what SGLang's gateway, ``sglang-router``
  0.3.2, passes on to its workers; it drops the other two);
* OpenAI-compatible endpoints: the request's ``user`` field, else header
  ``X-Client-Id``, else SGLang's own ``x-smg-routing-key`` header;
* none of these: client ``default``. The scheduler normalizes ids
  (``sglang_fair.core.clients``).

Application identity for FairServe and Justitia rides along in the same
``routing_key`` (SGLang has no other per-request field that reaches the
scheduler untouched): headers ``X-App-Id``, ``X-Interaction-Id``,
``X-Interaction-Stage`` (integer >= 0) and ``X-System-Tokens`` (integer >= 0)
are appended as ``client;app=...;ia=...;st=...;sys=...``. Without them the
key is the bare client id. A malformed stage or system-token count is refused
with HTTP 400 naming the header.

Hooks:
* ``client_from_generate_headers`` BEFORE
  ``sglang.srt.entrypoints.http_server.serve_generate_request`` (SGLang 0.5.21
  has none: ``identify_generate_route`` BEFORE ``http_server.launch_server``
  runs it ahead of the ``/generate`` route function, ``http/routes.py``);
* ``remember_openai_user`` BEFORE
  ``sglang.srt.entrypoints.openai.serving_base.OpenAIServingBase.handle_request``;
* ``openai_client_key`` AROUND ``OpenAIServingBase.extract_routing_key``.
"""

from __future__ import annotations

from sglang_fair.binding.common.request_identity import APP_HEADERS, INTEGER_FIELDS, parse_count, routing_key_problem
from sglang_fair.binding.http import client_keys, routes

CLIENT_HEADER = "x-client-id"
GATEWAY_HEADER = "x-smg-routing-key"  # SGLang's own routing-key header, forwarded by its gateway


def encode_identity(client: str | None, headers) -> str | None:
    """The routing key carrying ``client`` and the application headers, if any.

    A ``client`` that already carries fields (a body ``routing_key`` such as
    ``alice;app=agent;st=2``) must carry well-formed ones: 400 otherwise.
    """
    if client and ";" in client and (problem := routing_key_problem(client)):
        _bad_request(f"routing key {client[:80]!r}: {problem}")
    parts = []
    for header, key in APP_HEADERS.items():
        value = headers.get(header) if headers is not None else None
        if value is None or not value.strip():
            continue
        value = value.strip()
        if key in INTEGER_FIELDS and parse_count(value) is None:
            _bad_request(f"{INTEGER_FIELDS[key]} must be an integer >= 0, got {value!r}")
        if ";" in value:
            _bad_request(f"header {header} must not contain ';'")
        parts.append(f"{key}={value}")
    if not parts:
        return client
    return ";".join([client or "", *parts])


def _bad_request(message: str):
    import fastapi

    raise fastapi.HTTPException(status_code=400, detail=message)


def client_from_generate_headers(obj, request=None, *args, **kwargs):
    headers = request.headers if request is not None else None
    if headers is not None and client_keys.configured():
        # The key decides; a claimed X-Client-Id or routing_key is ignored.
        obj.routing_key = encode_identity(client_keys.authenticated_client(headers), headers)
        return None
    obj.routing_key = encode_identity(generate_client(headers, obj.routing_key), headers)
    return None


def generate_client(headers, body_key: str | None) -> str | None:
    """Who a native ``/generate`` request names: ``X-Client-Id``, the body's ``routing_key``,
    then the gateway's ``x-smg-routing-key``."""
    if headers is None:
        return body_key
    return headers.get(CLIENT_HEADER) or body_key or headers.get(GATEWAY_HEADER)


def identify_generate_route(*args, **kwargs) -> None:
    from sglang.srt.entrypoints import http_server

    routes.wrap_route(http_server.app, "/generate", before=client_from_generate_headers)


def remember_openai_user(serving, request, raw_request=None, *args, **kwargs):
    user = getattr(request, "user", None)
    if user and raw_request is not None:
        raw_request.state.sglang_fair_client = user
    return None


def openai_client_key(original, serving, raw_request, *args, **kwargs):
    if raw_request is None:
        return original(serving, raw_request, *args, **kwargs)
    if client_keys.configured():
        return encode_identity(client_keys.authenticated_client(raw_request.headers), raw_request.headers)
    client = (
        getattr(raw_request.state, "sglang_fair_client", None)
        or raw_request.headers.get(CLIENT_HEADER)
        or original(serving, raw_request, *args, **kwargs)
    )
    return encode_identity(client, raw_request.headers)
