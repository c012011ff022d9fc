"""An unsupported SGLang release is refused at start, loudly, naming both releases."""

from __future__ import annotations

import logging

import pytest

from sglang_fair.binding.common import version
from sglang_fair.binding.common.settings import ALLOW_UNSUPPORTED_ENV
from sglang_fair.binding.common.version import (SUPPORTED_SGLANG, UnsupportedSGLang, check_sglang,
                                         sends_aborts_inline)


def test_the_pinned_release_is_supported_and_installed():
    pytest.importorskip("sglang")
    assert check_sglang() in SUPPORTED_SGLANG


def test_another_release_is_refused_naming_both(monkeypatch):
    monkeypatch.delenv(ALLOW_UNSUPPORTED_ENV, raising=False)
    with pytest.raises(UnsupportedSGLang) as exc:
        check_sglang("0.5.14")
    message = str(exc.value)
    assert "SGLang 0.5.14 is installed" in message and SUPPORTED_SGLANG[-1] in message and ALLOW_UNSUPPORTED_ENV in message
    monkeypatch.setattr(version, "installed_sglang", lambda: None)
    with pytest.raises(UnsupportedSGLang, match="no SGLang is installed"):
        check_sglang()


def test_the_override_loads_with_a_warning(monkeypatch, caplog):
    monkeypatch.setenv(ALLOW_UNSUPPORTED_ENV, "1")
    with caplog.at_level(logging.WARNING, logger=version.__name__):
        assert check_sglang("0.5.14") == "0.5.14"
    assert "loading anyway" in caplog.text


def test_releases_before_0_5_23_send_abort_answers_inline():
    # The hook table then reports aborts from the tokenizer socket's sender (binding/hooks.py).
    assert sends_aborts_inline("0.5.22") and sends_aborts_inline("0.5.21.post1")
    assert not any(map(sends_aborts_inline, ["0.5.23", "0.5.23+cpu", "0.5.24", "0.6.0", "1.0"]))


def test_release_before_compares_releases_not_strings():
    assert version.release_before("0.5.22", "0.5.21") and version.release_before("0.5.22", "0.5.21rc1")
    assert not version.release_before("0.5.22", "0.5.22+cpu")
    assert not version.release_before("0.5.3", "0.5.21")  # 21 > 3, though "0.5.21" < "0.5.3" as text
    assert version.release_before("0.10.0", "0.9.9")


@pytest.mark.engine
def test_the_plugin_stops_the_process_on_an_unsupported_release(monkeypatch):
    pytest.importorskip("sglang")
    from sglang_fair.binding import plugin

    monkeypatch.delenv(ALLOW_UNSUPPORTED_ENV, raising=False)
    monkeypatch.setattr(version, "installed_sglang", lambda: "0.5.14")
    with pytest.raises(SystemExit, match="sglang-fair: error: sglang-fair supports SGLang"):
        plugin.register()
