"""binding/common/settings.py: the typed settings the launcher exports to SGLang's processes."""

from __future__ import annotations

import pytest

from sglang_fair.binding.common import settings
from sglang_fair.binding.common.settings import RouterSettings
from sglang_fair.core.options import FairOptions, OptionError


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch):
    monkeypatch.delenv(settings.WORKER_ENV, raising=False)
    monkeypatch.delenv(settings.ROUTER_ENV, raising=False)


def test_worker_options_round_trip_and_the_scheduler_names_the_policy():
    assert not settings.configured()
    settings.export_worker(FairOptions(policy="dlpm", quantum=512.0, client_weights={"alice": 2.0}))
    assert settings.configured()
    loaded = settings.load_worker("vtc")
    assert (loaded.policy, loaded.quantum, loaded.client_weights) == ("vtc", 512.0, {"alice": 2.0})
    assert settings.load_worker("dlpm") == FairOptions(policy="dlpm", quantum=512.0, client_weights={"alice": 2.0})


def test_no_worker_settings_means_the_defaults():
    assert settings.load_worker("dlpm") == FairOptions(policy="dlpm")


def test_router_settings_round_trip_and_another_method_gets_its_defaults():
    RouterSettings("d2lpm_global", {"quantum": 256.0}, kv_port=31000, feedback="ipc://@x").export()
    assert settings.configured()
    assert RouterSettings.load("d2lpm_global") == RouterSettings("d2lpm_global", {"quantum": 256.0}, 31000, "ipc://@x")
    assert RouterSettings.load("preble") == RouterSettings("preble")
    RouterSettings("d2lpm").export()  # unset fields are not written
    assert settings.exported_router() == RouterSettings("d2lpm")


@pytest.mark.parametrize("env, raw, message", [
    ("WORKER_ENV", "{not json", "SGLANG_FAIR_CONFIG is not valid JSON"),
    ("WORKER_ENV", '{"quantum": 1, "quantun": 2}', "SGLANG_FAIR_CONFIG: unknown setting(s) quantun"),
    ("ROUTER_ENV", '["d2lpm"]', "SGLANG_FAIR_ROUTER_CONFIG must be a JSON object"),
    ("ROUTER_ENV", '{"method": "d2lpm", "port": 1}', "SGLANG_FAIR_ROUTER_CONFIG: unknown setting(s) port"),
    ("ROUTER_ENV", '{"options": {}}', "needs a router name in 'method'"),
    ("ROUTER_ENV", '{"method": "d2lpm", "options": [1]}', "an object in 'options'"),
])
def test_settings_a_process_cannot_read_are_errors_naming_the_variable(monkeypatch, env, raw, message):
    monkeypatch.setenv(getattr(settings, env), raw)
    with pytest.raises(OptionError) as exc:
        settings.load_worker("dlpm") if env == "WORKER_ENV" else settings.exported_router()
    assert message in str(exc.value)


def test_no_module_but_settings_reads_an_sglang_fair_variable():
    """Every ``SGLANG_FAIR_*`` variable is named, read and written in ``binding/common/settings.py``
    only: no other module spells one out."""
    import re
    from pathlib import Path

    import sglang_fair

    package = Path(sglang_fair.__file__).parent
    ours = re.compile(r"""["']SGLANG_FAIR_(?!BUILTIN\b)\w+["']""")  # BUILTIN: the patched SGLang's marker
    offenders = [str(path.relative_to(package)) for path in package.rglob("*.py")
                 if path != Path(settings.__file__) and ours.search(path.read_text())]
    assert offenders == []
