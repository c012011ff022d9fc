"""A throttled request's answer: HTTP 429 with Retry-After, on every supported SGLang.

``retry_after_header`` wraps ``TokenizerManager._handle_abort_finish_reason``.
The two stand-ins below are how 0.5.23 and 0.5.22 treat an abort's status
(the server tests in test_e2e_http.py run the real one).
"""

from __future__ import annotations

import asyncio
from http import HTTPStatus

import pytest

fastapi = pytest.importorskip("fastapi")

from sglang_fair.binding.http.throttle_response import retry_after_header  # noqa: E402


async def _ends_any_error_status(manager, out, state, is_stream):  # SGLang 0.5.23
    reason = out["meta_info"]["finish_reason"]
    if reason.get("type") != "abort" or not 400 <= reason.get("status_code", 0) < 600:
        return None
    if is_stream:
        return out
    raise fastapi.HTTPException(status_code=reason["status_code"], detail=reason["message"])


async def _ends_known_statuses_only(manager, out, state, is_stream):  # SGLang 0.5.22
    if out["meta_info"]["finish_reason"].get("status_code") not in (400, 500, 503):
        return None
    return await _ends_any_error_status(manager, out, state, is_stream)


def _throttled() -> dict:
    return {"meta_info": {"finish_reason": {"type": "abort", "status_code": 429, "message": "slow down",
                                            "retry_after": 7}}}


@pytest.mark.parametrize("original", [_ends_any_error_status, _ends_known_statuses_only])
def test_a_throttled_request_gets_429_with_retry_after(original):
    out = _throttled()
    with pytest.raises(fastapi.HTTPException) as exc:
        asyncio.run(retry_after_header(original, None, out, None, False))
    assert exc.value.status_code == HTTPStatus.TOO_MANY_REQUESTS and exc.value.detail == "slow down"
    assert exc.value.headers == {"Retry-After": "7"}
    assert out["meta_info"]["finish_reason"]["status_code"] == 429  # the output is left as it came


@pytest.mark.parametrize("original", [_ends_any_error_status, _ends_known_statuses_only])
def test_a_throttled_stream_ends_with_its_429_abort_chunk(original):
    out = _throttled()
    assert asyncio.run(retry_after_header(original, None, out, None, True)) is out
    assert out["meta_info"]["finish_reason"]["status_code"] == 429


def test_other_outputs_pass_through_untouched():
    finished = {"meta_info": {"finish_reason": {"type": "length", "length": 2}}}
    assert asyncio.run(retry_after_header(_ends_known_statuses_only, None, finished, None, False)) is None
    refused = {"meta_info": {"finish_reason": {"type": "abort", "status_code": 503, "message": "full"}}}
    with pytest.raises(fastapi.HTTPException) as exc:
        asyncio.run(retry_after_header(_ends_known_statuses_only, None, refused, None, False))
    assert exc.value.status_code == 503 and exc.value.headers is None
