"""``--tp 2`` on CPU, started as README shows (no environment variable): both ranks admit alike.

Each tensor-parallel rank runs its own scheduler with its own copy of the
fair policy; SGLang gives both the same requests, and they must take the same
admission decisions. Three clients send at once into two running slots, so
DLPM reorders, then again after a pause longer than the idle timeout (the
ranks forget them at the same arrival: they read one clock, rank 0's);
every request must be answered once, and each rank's log line
(its number of admissions and their digest, written when it goes idle) must
be the same on both ranks.
"""

from __future__ import annotations

import concurrent.futures
import re
import time

import pytest

from sglang_fair.testing.server import LocalServer

pytestmark = pytest.mark.server

DIGEST = re.compile(r"TP(\d)[^\]]*\] sglang-fair: (\d+) admissions, digest ([0-9a-f]+)")


def test_both_ranks_take_the_same_admission_decisions():
    # A 2 s idle timeout, and a pause longer than it between two rounds: each rank forgets the
    # clients in between, at the next arrival's stamp, so the second round starts alike on both.
    args = ["--policy", "dlpm", "--tp", "2", "--max-running-requests", "2", "--fair-quantum", "64",
            "--fair-idle-timeout", "2"]
    with LocalServer(module="sglang_fair.launch_server", extra_args=args, skip_tokenizer_init=True,
                     startup_timeout_s=600) as server:
        def send(i: int) -> dict:
            client = ("alice", "bob", "carol")[i % 3]
            body = {"input_ids": [5 + i % 3] * 40 + [100 + i], "sampling_params": {"max_new_tokens": 6, "ignore_eos": True}}
            return server.post_json("/generate", body, headers={"X-Client-Id": client}, timeout=300)

        with concurrent.futures.ThreadPoolExecutor(18) as pool:
            answers = list(pool.map(send, range(18)))
            time.sleep(3)
            answers += list(pool.map(send, range(18, 30)))
        assert len(answers) == 30 and all(len(a["output_ids"]) == 6 for a in answers)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            last = {}
            for rank, count, digest in DIGEST.findall(server.log_tail(lines=4000)):
                last[rank] = (int(count), digest)
            if set(last) == {"0", "1"} and last["0"][0] >= 30 and last["1"][0] >= 30:
                break
            time.sleep(1)
        assert set(last) == {"0", "1"}, server.log_tail(lines=60)
        assert last["0"] == last["1"]
        assert last["0"][0] >= 30
        log = server.log_tail(lines=4000)
        assert all(f"tensor-parallel rank {rank} reads rank 0's clock" in log for rank in (0, 1))
