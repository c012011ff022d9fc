"""Request errors name the field they are about, and carry neither source paths nor the input."""

from __future__ import annotations

import pytest

from sglang_fair.binding.http.validation import describe_errors, name_the_field


def _contract(body):
    """A stand-in contract with SGLang's error style: the first bad field, unnamed."""
    for key, value in body.items() if isinstance(body, dict) else ():
        if key == "stream" and not isinstance(value, bool):
            return f'invalid type: string "{value}", expected a boolean'
        params = value if key == "sampling_params" else None
        for one in params if isinstance(params, list) else [params] if isinstance(params, dict) else []:
            if not isinstance(one.get("max_new_tokens", 0), int):
                return f"invalid type: floating point `{one['max_new_tokens']}`, expected i64"
    return None


def test_the_first_error_is_named_by_its_path_in_plain_words():
    body = {"text": "hi", "sampling_params": {"temperature": 0.5, "max_new_tokens": 1.5}}
    assert name_the_field(_contract, body) == (
        "sampling_params.max_new_tokens: invalid type: floating point `1.5`, expected an integer")
    listed = {"sampling_params": [{"max_new_tokens": 3}, {"max_new_tokens": 2.5}]}
    assert name_the_field(_contract, listed).startswith("sampling_params[1].max_new_tokens: ")


def test_with_two_errors_the_one_reported_is_the_one_named():
    body = {"stream": "yes", "sampling_params": {"max_new_tokens": 1.5}}
    assert name_the_field(_contract, body) == 'stream: invalid type: string "yes", expected a boolean'


def test_a_valid_body_passes_untouched():
    assert name_the_field(_contract, {"text": "hi", "sampling_params": {"max_new_tokens": 3}}) is None


def test_sglangs_own_contract_errors_are_named():
    api_types = pytest.importorskip("sglang.api.v1.api_types")

    def check(body):  # SGLang's contract check itself (its function may carry our hook in this process)
        try:
            api_types.GenerateRequest.from_json_value(body)
        except api_types.JsonContractError as exc:
            return str(exc)
        return None

    assert name_the_field(check, {"text": "hi", "sampling_params": {"temperature": "hot"}}).startswith(
        "sampling_params.temperature: invalid type: string \"hot\", expected a number")


def test_fastapi_errors_become_field_and_message_without_input():
    errors = [
        {"type": "string_type", "loc": ("body", "text", "str"), "msg": "Input should be a valid string", "input": 5},
        {"type": "list_type", "loc": ("body", "text", "list[str]"), "msg": "Input should be a valid list", "input": 5},
        {"type": "dict_type", "loc": ("body", "sampling_params", "list[dict[str,any]]", 0),
         "msg": "Input should be a valid dictionary", "input": "secret"},
        {"type": "json_invalid", "loc": ("body", 0), "msg": "JSON decode error", "input": {}},
    ]
    assert describe_errors(errors) == ("text: Input should be a valid string or Input should be a valid list; "
                                       "sampling_params.0: Input should be a valid dictionary; "
                                       "body: JSON decode error")


def test_a_huge_body_gets_the_error_unnamed_rather_than_a_quadratic_search():
    calls = []

    def counting(body):
        calls.append(1)
        return _contract(body)

    body = {f"k{i}": i for i in range(5000)} | {"sampling_params": {"max_new_tokens": 1.5}}
    assert name_the_field(counting, body) == "invalid type: floating point `1.5`, expected an integer"
    assert len(calls) == 1
