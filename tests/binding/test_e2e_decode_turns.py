"""End to end: latency isolation's decode turns on the real SGLang server on CPU.

A light client's request runs while a flood of long unique prompts, prefilled
in 64-token chunks (``--chunked-prefill-size 64``), keeps arriving: the
admission gate must skip passes so that the running batch decodes between
chunks (``binding/scheduler/isolation.py``, ``decode_turn``), SGLang must then
continue each chunked prompt where it stopped, and every request must be
answered once with all its tokens. Each rank logs the turns it took when it
goes idle (``admission_log.py``).
"""

from __future__ import annotations

import concurrent.futures
import re
import time

import pytest

from sglang_fair.testing.server import LocalServer

pytestmark = pytest.mark.server

TURNS = re.compile(r"sglang-fair: (\d+) admissions, digest [0-9a-f]+, (\d+) decode turns")
FLOOD, FLOOD_NEW, LIGHT_NEW = 12, 16, 400


def test_the_light_clients_request_decodes_between_the_floods_chunks():
    args = ["--policy", "dlpm", "--fair-isolation", "--chunked-prefill-size", "64", "--max-running-requests", "8"]
    with LocalServer(module="sglang_fair.launch_server", extra_args=args, skip_tokenizer_init=True,
                     max_total_tokens=8192) as server:
        def send(client: str, ids: list[int], max_new: int) -> dict:
            body = {"input_ids": ids, "sampling_params": {"max_new_tokens": max_new, "ignore_eos": True}}
            return server.post_json("/generate", body, headers={"X-Client-Id": client}, timeout=300)

        with concurrent.futures.ThreadPoolExecutor(FLOOD + 1) as pool:
            light = pool.submit(send, "light", [3 + i for i in range(16)], LIGHT_NEW)
            time.sleep(0.3)  # the light request runs before the flood arrives
            flood = [pool.submit(send, "flood", [(37 * n + i) % 900 + 1 for i in range(200)], FLOOD_NEW)
                     for n in range(FLOOD)]
            answers = [f.result() for f in flood]
            light_answer = light.result()
        assert len(light_answer["output_ids"]) == LIGHT_NEW
        assert len(answers) == FLOOD and all(len(a["output_ids"]) == FLOOD_NEW for a in answers)
        deadline = time.monotonic() + 30
        found = []
        while time.monotonic() < deadline and not found:
            found = [(int(a), int(t)) for a, t in TURNS.findall(server.log_tail(lines=4000)) if int(a) >= FLOOD + 1]
            time.sleep(0.5)
        assert found, server.log_tail(lines=60)
        assert found[-1][1] > 0, "no decode turn was taken"
