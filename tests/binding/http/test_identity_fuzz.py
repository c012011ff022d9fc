"""Property tests of the parsers of client-sent identity: a valid value is parsed,
an invalid one is refused with HTTP 400, and nothing else ever happens."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sglang_fair.binding.common import settings as fair_settings
from sglang_fair.binding.common.request_identity import APP_HEADERS, decode_identity, parse_count
from sglang_fair.binding.http.identity import encode_identity, openai_client_key
from sglang_fair.core.apps import normalize_app_id
from sglang_fair.core.clients import normalize_client_id

fastapi = pytest.importorskip("fastapi")

# Any text a client can put in a header or a JSON string, including digits of
# other scripts, separators of our encoding and lone surrogates.
hostile = st.one_of(
    st.text(),
    st.text(alphabet="0123456789;=²³¹٣௫ \t", max_size=12),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=40),
)
headers = st.dictionaries(st.sampled_from(sorted(APP_HEADERS)), hostile, max_size=4)


@settings(max_examples=300, deadline=None)
@given(client=st.one_of(st.none(), hostile), sent=headers)
def test_encoding_headers_either_succeeds_and_round_trips_or_refuses_with_400(client, sent):
    try:
        key = encode_identity(client, sent)
    except fastapi.HTTPException as exc:
        assert exc.status_code == 400
        return
    who = decode_identity(key)
    for header, value in sent.items():
        field = APP_HEADERS[header]
        if field in ("st", "sys") and value.strip():
            assert parse_count(value.strip()) is not None  # accepted counts are plain ASCII digits
    normalize_client_id(who.client)
    normalize_app_id(who.app)


@settings(max_examples=500, deadline=None)
@given(key=st.one_of(st.none(), hostile))
def test_any_routing_key_decodes_to_bounded_identities(key):
    # The body's routing_key reaches the scheduler untouched: decoding must never raise.
    who = decode_identity(key)
    assert who.stage is None or 0 <= who.stage < 10**9
    assert 0 <= who.system_tokens < 10**9
    assert len(normalize_client_id(who.client)) <= 128
    app = normalize_app_id(who.app)
    assert app is None or isinstance(app, str)


@settings(max_examples=300, deadline=None)
@given(value=st.one_of(st.none(), hostile))
def test_parse_count_is_ascii_digits_or_none(value):
    n = parse_count(value)
    assert n is None or (value.isascii() and str(n) == value.lstrip("0").rjust(1, "0") and n < 10**9)


class _RawRequest:
    """What ``openai_client_key`` reads of SGLang's raw request: state (the ``user`` field) and headers."""

    def __init__(self, user, headers) -> None:
        self.state = type("State", (), {"sglang_fair_client": user})()
        self.headers = headers


@settings(max_examples=300, deadline=None)
@given(user=st.one_of(st.none(), hostile), sent=headers)
def test_openai_user_either_becomes_a_routing_key_or_refuses_with_400(user, sent):
    try:
        with pytest.MonkeyPatch.context() as mp:  # without client keys the user field names the client
            mp.delenv(fair_settings.CLIENT_KEYS_ENV, raising=False)
            key = openai_client_key(lambda serving, raw: None, None, _RawRequest(user, sent))
    except fastapi.HTTPException as exc:
        assert exc.status_code == 400
        return
    who = decode_identity(key)
    if user and user.strip() and ";" not in user:
        assert who.charged_client == normalize_client_id(user)  # the user field names the client charged
    normalize_app_id(who.app)
