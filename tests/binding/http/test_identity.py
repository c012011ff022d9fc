"""Client and application identity carried in SGLang's routing_key."""

from __future__ import annotations

import pytest

from sglang_fair.binding.common.request_identity import decode_identity
from sglang_fair.binding.http.identity import encode_identity, generate_client


def test_bare_client_stays_a_bare_key():
    assert encode_identity("alice", {}) == "alice"
    assert decode_identity("alice").client == "alice"
    assert decode_identity(None).client is None


def test_application_headers_round_trip():
    headers = {"x-app-id": "agent", "x-interaction-id": "run-7", "x-interaction-stage": "2", "x-system-tokens": "120"}
    who = decode_identity(encode_identity("alice", headers))
    assert (who.client, who.app, who.interaction, who.stage, who.system_tokens) == ("alice", "agent", "run-7", 2, 120)


@pytest.mark.parametrize("header, value", [("x-interaction-stage", "-1"), ("x-interaction-stage", "two"),
                                           ("x-system-tokens", "1e9"), ("x-app-id", "a;b"),
                                           ("x-interaction-stage", "\u00b2"), ("x-system-tokens", "\u0661\u0662")])
def test_malformed_application_headers_are_refused(header, value):
    fastapi = pytest.importorskip("fastapi")
    with pytest.raises(fastapi.HTTPException) as exc:
        encode_identity("alice", {header: value})
    assert exc.value.status_code == 400


@pytest.mark.parametrize("key", ["mallory;st=\u00b2", "mallory;sys=\u00b2\u00b3", "mallory;st=1234567890",
                                 "mallory;st=;sys=", "mallory;st=\u0663"])
def test_a_routing_key_sent_in_the_body_never_makes_decoding_raise(key):
    # routing_key can come straight from a client's body, past the header checks.
    who = decode_identity(key)
    assert who.client == "mallory" and who.stage is None and who.system_tokens == 0


def test_every_interaction_of_a_client_is_charged_to_the_client():
    # The router and the schedulers key deficits by client_of: application fields must not split a client.
    from sglang_fair.binding.common.request_identity import client_of

    a = encode_identity("alice", {"x-app-id": "agent", "x-interaction-id": "run-1"})
    b = encode_identity("alice", {"x-app-id": "chat", "x-interaction-id": "run-2", "x-interaction-stage": "3"})
    assert a != b and client_of(a) == client_of(b) == client_of("alice") == "alice"
    assert client_of(None) == client_of("") == client_of(";app=x")


def test_a_routing_key_with_fields_must_carry_well_formed_ones():
    from sglang_fair.binding.common.request_identity import routing_key_problem

    assert routing_key_problem("alice;app=agent;ia=run-1;st=2;sys=40") is None
    assert "X-Interaction-Stage" in routing_key_problem("mallory;st=²")
    assert "X-System-Tokens" in routing_key_problem("m;sys=-5")
    for bad in ("a;;", "a;colour=red", "a;app=", "a;st"):
        assert "is not one of" in routing_key_problem(bad), bad


def test_generate_names_the_client_by_header_then_body_then_the_gateway_header():
    # SGLang's gateway passes on only x-smg-routing-key; a direct client's own claims come first.
    both = {"x-client-id": "alice", "x-smg-routing-key": "carol"}
    assert generate_client(both, "bob") == "alice"
    assert generate_client({"x-smg-routing-key": "carol"}, "bob") == "bob"
    assert generate_client({"x-smg-routing-key": "carol;app=agent"}, None) == "carol;app=agent"
    assert generate_client({}, None) is None and generate_client(None, "bob") == "bob"
