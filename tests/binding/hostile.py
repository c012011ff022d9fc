"""Hostile requests for real-server tests: bad identity headers, routing keys, bodies, ids."""

from __future__ import annotations

import json
import random


def generate_body(input_ids=tuple(range(1, 20)), **fields) -> bytes:
    return json.dumps({"input_ids": list(input_ids), "sampling_params": {"max_new_tokens": 2}, **fields}).encode()


def hostile_requests(seed: int, count: int) -> list[tuple[bytes, dict]]:
    """``count`` (body, headers) pairs, reproducible from ``seed``."""
    rng = random.Random(seed)
    bad_values = ["²", "\xb2", "-1", "1e9", "9" * 40, " 3", "3 ", "", ";", "a;st=²", "x" * 5000, "\u202e", "0x10",
                  "ｘ", "NaN", "None", "[]", "{}"]
    headers = ["X-Client-Id", "X-App-Id", "X-Interaction-Id", "X-Interaction-Stage", "X-System-Tokens"]
    out = []
    for _ in range(count):
        kind = rng.randrange(4)
        if kind == 0:  # hostile headers
            chosen = {name: rng.choice(bad_values) for name in rng.sample(headers, rng.randint(1, 3))}
            out.append((generate_body(), {k: v.encode("utf-8", "surrogatepass").decode("latin-1") for k, v in chosen.items()}))
        elif kind == 1:  # hostile routing keys in the body
            key = rng.choice(["mallory;st=²", "m;sys=-5", ";;;", "a;app=" + "z" * 3000, "b;ia=1;st=99999999999"])
            out.append((generate_body(routing_key=key), {}))
        elif kind == 2:  # bodies of the wrong shape
            out.append((rng.choice([b"{", b"[]", b'{"input_ids": "abc"}', b'{"input_ids": [1, -5]}',
                                    b'{"input_ids": [1], "sampling_params": {"max_new_tokens": -3}}',
                                    b'{"text": 5}', b"\xff\xfe"]), {}))
        else:  # out-of-vocabulary ids
            out.append((generate_body(input_ids=[1, 2, rng.choice([10 ** 7, 2 ** 40])]), {"X-Client-Id": "oov"}))
    return out
