"""Each release's series in patches/ applies cleanly to that SGLang's source, and the patched tree works.

The pristine source is the installed sglang package (its wheel ships the
Python source the patches touch); the series for the other supported
releases are checked by scripts/test_sglang_release.sh.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.http import call, client_metric, metrics_text, wait_until
from tests.support.patched_sglang import PATCHES_DIR, patch_series, patched_env


def test_patches_hold_one_series_per_supported_release():
    from sglang_fair.binding.common.version import SUPPORTED_SGLANG

    assert sorted(p.name for p in PATCHES_DIR.iterdir() if p.is_dir()) == sorted(SUPPORTED_SGLANG)
    names = [p.name for p in patch_series(SUPPORTED_SGLANG[-1])]
    for release in SUPPORTED_SGLANG:
        assert [p.name for p in patch_series(release)] == names, release


@pytest.mark.engine
def test_series_applies_and_compiles(patched_tree):
    import sglang

    assert [p.name[:4] for p in patch_series(sglang.__version__)] == ["0001", "0002", "0003", "0004"]
    touched = ["srt/server_args.py", "srt/managers/scheduler.py", "srt/managers/schedule_policy.py",
               "srt/entrypoints/http_server.py", "srt/entrypoints/openai/serving_base.py",
               "srt/managers/tokenizer_manager.py"]
    for rel in touched:
        path = patched_tree / "sglang" / rel
        assert "sglang-fair" in path.read_text() or "SGLANG_FAIR" in path.read_text(), rel
        subprocess.run([sys.executable, "-m", "py_compile", str(path)], check=True)


_PROBE = """
import inspect, json, pkgutil, sglang
from sglang.srt.plugins.hook_registry import HookRegistry
from sglang_fair.binding import plugin
from sglang_fair.binding.hooks import hook_table, hooks_to_register
plugin.register()
registered = sorted(f"{t}:{h.__module__}.{h.__name__}" for t, hs in HookRegistry._hooks.items() for _, h, _ in hs)
expected = sorted(f"{h.target}:{h.function.__module__}.{h.function.__name__}" for h in hooks_to_register(True))
carried = {h.patched_in: "sglang-fair" in inspect.getsource(pkgutil.resolve_name(h.patched_in))
           or "sglang_fair" in inspect.getsource(pkgutil.resolve_name(h.patched_in)) for h in hook_table() if h.patched_in}
print(json.dumps({"location": sglang.__file__, "registered": registered, "expected": expected, "carried": carried}))
"""


def _probe(tree: Path | None) -> dict:
    env = dict(os.environ) | (patched_env(tree) if tree is not None else {})
    out = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out.splitlines()[-1])


@pytest.mark.engine
def test_the_series_carries_every_hook_the_table_says_it_does(patched_tree):
    patched, stock = _probe(patched_tree), _probe(None)
    assert patched["location"].startswith(str(patched_tree))
    assert patched["carried"] and all(patched["carried"].values()), patched["carried"]
    assert not any(stock["carried"].values()), stock["carried"]  # the marks come from the patches


@pytest.mark.engine
def test_a_patched_sglang_is_hooked_only_where_no_patch_carries_the_call(patched_tree):
    probe = _probe(patched_tree)
    assert probe["registered"] == probe["expected"]
    targets = {entry.split(":")[0] for entry in probe["registered"]}
    assert "sglang.srt.managers.data_parallel_controller.DataParallelController.__init__" in targets
    # The admission pass's gate wraps the patched source as it wraps the stock one.
    assert "sglang.srt.managers.scheduler.Scheduler._get_new_batch_prefill_raw" in targets


@pytest.mark.server
def test_server_from_patched_tree_schedules_with_our_policy(patched_fairserve_server):
    # The shared FairServe server on the patched tree (tests/conftest.py); each client's first request.
    server = patched_fairserve_server
    for client in ("patched-alice", "patched-bob"):
        body = {"input_ids": list(range(1, 60)), "sampling_params": {"max_new_tokens": 4}}
        reply = call(server.url("/generate"), body, {"X-Client-Id": client})
        assert reply.status == 200, reply.text
    assert "schedule policy fairserve (gated" in Path(server.log_path).read_text()
    # The series refresh at most once a second, after a batch or on an idle tick (each second).
    wait_until(lambda: metrics_text(server),
               lambda text: client_metric(text, "client_input_tokens_total", "patched-alice") is not None,
               timeout_s=10, interval_s=0.3, what="patched-alice's input tokens on /metrics")
