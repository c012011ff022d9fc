"""--fair-client-keys on the real server: a request is charged to its key's client, whatever it claims."""

from __future__ import annotations


import pytest

from sglang_fair.testing.server import LocalServer
from tests.support.http import call, client_metric, metrics_text, wait_until

pytestmark = pytest.mark.server

ALICE, BOB = "sk-alice-3f9c1e2a7b", "sk-bob-8d41aa0c2e"


def _post(server, path: str, body: dict, headers: dict) -> tuple[int, dict]:
    reply = call(server.url(path), body, headers)
    return reply.status, reply.json({})


def test_the_key_decides_who_is_charged(tmp_path):
    keys = tmp_path / "keys.yaml"
    keys.write_text(f"alice: {ALICE}\nbob: {BOB}\n")
    args = ["--policy", "dlpm", "--enable-metrics", "--fair-client-keys", str(keys)]
    # The server starting at all shows SGLang's own keyless warmup got through.
    with LocalServer(module="sglang_fair.launch_server", extra_args=args) as server:
        generate = {"input_ids": list(range(1, 30)), "sampling_params": {"max_new_tokens": 2}}
        assert _post(server, "/generate", generate, {})[0] == 401
        assert _post(server, "/generate", generate, {"Authorization": "Bearer sk-forged-00000000000"})[0] == 401
        # Bob claims to be alice: charged to bob.
        claims_alice = {"Authorization": f"Bearer {BOB}", "X-Client-Id": "alice"}
        assert _post(server, "/generate", generate, claims_alice)[0] == 200
        chat = {"model": "default", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "user": "bob"}
        assert _post(server, "/v1/chat/completions", chat, {"Authorization": f"Bearer {ALICE}"})[0] == 200
        assert _post(server, "/v1/chat/completions", chat, {})[0] == 401
        # Gauges refresh once a second: wait until both clients' output counters show up.
        text = wait_until(lambda: metrics_text(server, timeout=30),
                          lambda text: all((client_metric(text, "client_output_tokens_total", client) or 0) >= 2.0
                                           for client in ("alice", "bob")),
                          timeout_s=10, interval_s=0.5, what="output counters for alice and bob")
        outputs = {client: client_metric(text, "client_output_tokens_total", client) for client in ("alice", "bob")}
        # Each was charged exactly its own generation: 2 output tokens, not the other's.
        assert outputs["bob"] == 2.0 and outputs["alice"] == 2.0, outputs
