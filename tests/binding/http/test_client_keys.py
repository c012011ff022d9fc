"""--fair-client-keys: the key file's checks and the client a request's key names."""

from __future__ import annotations

import pytest

fastapi = pytest.importorskip("fastapi")

from sglang_fair.binding.common import settings  # noqa: E402
from sglang_fair.binding.http import client_keys  # noqa: E402
from sglang_fair.binding.http.client_keys import ClientKeyError, authenticated_client, load_keys  # noqa: E402

ALICE, BOB, BOB_CI = "sk-alice-3f9c1e2a7b", "sk-bob-8d41aa0c2e", "sk-bob-ci-77e0b1d943"


@pytest.fixture
def keys_file(tmp_path, monkeypatch):
    path = tmp_path / "keys.yaml"
    path.write_text(f"alice: {ALICE}\nbob: [{BOB}, {BOB_CI}]\n")
    monkeypatch.delenv(settings.CLIENT_KEYS_ENV, raising=False)
    client_keys.export(str(path))
    yield path
    client_keys._digests.cache_clear()


def test_each_key_names_its_client(keys_file) -> None:
    assert load_keys(keys_file) == {ALICE: "alice", BOB: "bob", BOB_CI: "bob"}
    assert authenticated_client({"authorization": f"Bearer {BOB_CI}"}) == "bob"
    assert authenticated_client({"x-api-key": ALICE, "x-client-id": "bob"}) == "alice"


@pytest.mark.parametrize("headers", [{}, {"authorization": "Bearer sk-unknown-000000000"},
                                     {"authorization": f"Basic {ALICE}"}, {"x-api-key": ""}])
def test_a_missing_or_unknown_key_is_401(keys_file, headers) -> None:
    with pytest.raises(fastapi.HTTPException) as refused:
        authenticated_client(headers)
    assert refused.value.status_code == 401


def test_sglangs_own_warmup_is_let_in_only_while_warming_up(keys_file) -> None:
    assert client_keys.keyless_while_warming_up(lambda: authenticated_client({})) == "default"
    with pytest.raises(fastapi.HTTPException):
        authenticated_client({})


@pytest.mark.parametrize("text, message", [
    ("", "expected a mapping"),
    ("- alice\n", "expected a mapping"),
    ("alice: short\n", "at least 16 characters"),
    ("'al ice': sk-alice-3f9c1e2a7b\n", "client id 'al ice'"),
    (f"alice: {ALICE}\nbob: {ALICE}\n", "also belongs to alice"),
    ("alice: [unterminated\n", "not valid YAML"),
])
def test_a_bad_key_file_is_refused_naming_the_problem(tmp_path, text, message) -> None:
    path = tmp_path / "keys.yaml"
    path.write_text(text)
    with pytest.raises(ClientKeyError, match=message):
        load_keys(path)
    with pytest.raises(ClientKeyError, match="cannot read it"):
        load_keys(tmp_path / "missing.yaml")
