"""README's quick start, run as written: the tiny CPU server, both curls, the overloading bench."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from sglang_fair.testing.server import pick_free_port

REPO = Path(__file__).resolve().parents[1]
MARKER = "<!-- quick start: tests/test_readme.py runs this block as written -->"

pytestmark = pytest.mark.server


def quick_start_commands() -> list[str]:
    """The commands of the bash block after the marker, continuation lines joined."""
    text = (REPO / "README.md").read_text()
    block = re.search(re.escape(MARKER) + r"\s*```bash\n(.*?)```", text, re.S)
    assert block, "README.md lost its quick-start block"
    commands, current = [], ""
    for line in block.group(1).splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        current += line.rstrip("\\").rstrip() + " " if line.endswith("\\") else line
        if not line.endswith("\\"):
            commands.append(current.strip())
            current = ""
    return commands


def test_the_quick_start_block_is_what_this_test_runs():
    commands = quick_start_commands()
    assert "launch_server --tiny-cpu" in commands[0]
    assert [c.split()[0] for c in commands[1:3]] == ["curl", "curl"] and "bench run" in commands[3]
    assert "bench audit" in commands[4] and "--enable-metrics" in commands[0]  # the audit needs admission times


def test_readme_quick_start_runs_as_written(tmp_path):
    port = str(pick_free_port())
    server_cmd, *client_cmds = [c.replace("30000", port).replace("runs/", f"{tmp_path}/") for c in quick_start_commands()]
    log = open(tmp_path / "server.log", "w")
    server = subprocess.Popen(["bash", "-c", "exec " + server_cmd], cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                              start_new_session=True, env={k: v for k, v in os.environ.items() if k != "SGLANG_USE_CPU_ENGINE"})
    try:
        deadline = time.monotonic() + 300
        while True:
            assert server.poll() is None, (tmp_path / "server.log").read_text()[-3000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "server did not start within 300 s"
            time.sleep(2)
        generate, chat, bench, audit = (subprocess.run(["bash", "-c", c], cwd=REPO, capture_output=True, text=True,
                                                       timeout=600) for c in client_cmds)
        assert generate.returncode == 0 and isinstance(json.loads(generate.stdout)["text"], str), generate
        reply = json.loads(chat.stdout)
        assert chat.returncode == 0 and reply["choices"][0]["message"]["role"] == "assistant", chat.stdout
        assert bench.returncode == 0, bench.stdout + bench.stderr
        printed = bench.stdout.splitlines()
        assert any(line.startswith("client ") and "dlpm service" in line for line in printed), bench.stdout
        assert printed[-1].startswith("fairness audit: largest service gap"), bench.stdout
        assert audit.returncode == 0, audit.stdout + audit.stderr
        summary = json.loads((tmp_path / "quick" / "summary.json").read_text())
        assert set(summary["clients"]) >= {"bad"} and len(summary["clients"]) == 4
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
        log.close()
