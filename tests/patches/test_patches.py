"""patches/ applies cleanly to the pinned SGLang's source, and the patched tree works.

The pristine source is the installed sglang==0.5.23 package (its wheel ships
the Python source the patches touch).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

PATCHES = sorted((Path(__file__).resolve().parents[2] / "patches").glob("0*.patch"))


@pytest.fixture(scope="module")
def patched_tree(tmp_path_factory) -> Path:
    sglang = pytest.importorskip("sglang")
    assert sglang.__version__ == "0.5.23"
    root = tmp_path_factory.mktemp("patched")
    shutil.copytree(Path(sglang.__file__).parent, root / "sglang",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for patch in PATCHES:
        check = subprocess.run(["git", "apply", "--check", "-p1", str(patch)], cwd=root, capture_output=True, text=True)
        assert check.returncode == 0, f"{patch.name} does not apply: {check.stderr}"
        subprocess.run(["git", "apply", "-p1", str(patch)], cwd=root, check=True)
    return root


@pytest.mark.engine
def test_series_applies_and_compiles(patched_tree):
    assert [p.name[:4] for p in PATCHES] == ["0001", "0002", "0003"]
    touched = ["srt/server_args.py", "srt/managers/scheduler.py", "srt/managers/schedule_policy.py",
               "srt/entrypoints/http_server.py", "srt/entrypoints/openai/serving_base.py"]
    for rel in touched:
        path = patched_tree / "sglang" / rel
        assert "sglang-fair" in path.read_text() or "SGLANG_FAIR" in path.read_text(), rel
        subprocess.run([sys.executable, "-m", "py_compile", str(path)], check=True)


@pytest.mark.engine
def test_plugin_hooks_only_the_router_on_a_patched_sglang(patched_tree):
    probe = (
        "from sglang_fair.binding import plugin\n"
        "from sglang.srt.plugins.hook_registry import HookRegistry\n"
        "import sglang\n"
        "plugin.register()\n"
        "print(sglang.__file__, ' '.join(f'{t}:{h.__module__}' for t, hs in HookRegistry._hooks.items() for _, h, _ in hs))\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(patched_tree), os.environ.get("PYTHONPATH")])))
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True).stdout
    location, *hooked = out.split()
    assert location.startswith(str(patched_tree))
    # What the patches carry is not hooked again; the router, which they do not carry, is
    # (its scheduler-side reports included: they wrap some of the same functions).
    carried = [h for h in hooked if not h.endswith(":sglang_fair.binding.router_feedback")]
    assert not [h for h in carried if h.split(":")[0].endswith((
        ".SchedulePolicy", "._get_new_batch_prefill_raw", "._add_request_to_queue", ".process_batch_result",
        ".serve_generate_request", ".extract_routing_key"))], hooked
    targets = {h.split(":")[0] for h in hooked}
    assert "sglang.srt.managers.data_parallel_controller.DataParallelController.__init__" in targets


@pytest.mark.server
def test_server_from_patched_tree_schedules_with_dlpm(patched_tree):
    from sglang_fair.testing.server import LocalServer

    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(patched_tree), os.environ.get("PYTHONPATH")]))}
    with LocalServer(extra_args=["--schedule-policy", "dlpm", "--enable-metrics"], env=env,
                     skip_tokenizer_init=True) as server:
        for client in ("alice", "bob"):
            body = json.dumps({"input_ids": list(range(1, 60)), "sampling_params": {"max_new_tokens": 4}})
            req = urllib.request.Request(server.url("/generate"), data=body.encode(),
                                         headers={"Content-Type": "application/json", "X-Client-Id": client})
            urllib.request.urlopen(req, timeout=120).read()
        assert "schedule policy dlpm (gated" in Path(server.log_path).read_text()
        metrics = urllib.request.urlopen(server.url("/metrics"), timeout=60).read().decode()
        # Metrics refresh at most once a second, after a batch: alice's are there by now.
        assert 'sglang_fair:client_input_tokens{client="alice"' in metrics
