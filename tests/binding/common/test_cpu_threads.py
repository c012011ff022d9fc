"""Each rank of a multi-rank CPU server on its own cores: the launcher's default and the rank's pinning."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from sglang_fair.binding.common.cpu_threads import (BIND_ENV, TooFewCores, bind_groups, default_bind, format_cpu_list,
                                             parse_cpu_list)
from sglang_fair.launch_server import bind_rank_cores

CORES = sorted(os.sched_getaffinity(0))


def test_cpu_lists_read_and_write_as_linux_and_sglang_spell_them():
    assert parse_cpu_list("0-3,6") == [0, 1, 2, 3, 6]
    assert parse_cpu_list(" 5 ") == [5]
    assert format_cpu_list([3, 2, 1, 0]) == "0-3"
    assert format_cpu_list([0, 2, 4]) == "0,2,4"
    for bad in ("", "a", "3-1", "-1", "0-"):
        with pytest.raises(ValueError, match=BIND_ENV):
            parse_cpu_list(bad)


def test_bind_groups_give_each_rank_an_equal_slice():
    assert bind_groups(2, [0, 1]) == "0|1"
    assert bind_groups(2, [3, 2, 1, 0]) == "0-1|2-3"
    assert bind_groups(2, [0, 2, 4, 6]) == "0,2|4,6"
    assert bind_groups(2, [0, 1, 2]) == "0|1"  # the odd core is left to the other processes
    with pytest.raises(TooFewCores, match=r"3 ranks .* need at least 3 CPU cores.*may use 2 \(0-1\)"):
        bind_groups(3, [0, 1])


def test_default_bind_leaves_one_rank_and_a_given_binding_alone():
    assert default_bind(1, {}) is None
    assert default_bind(2, {BIND_ENV: "0|0"}) is None
    if len(CORES) >= 2:
        assert default_bind(2, {}) == bind_groups(2, CORES)


def test_the_launcher_refuses_more_ranks_than_cores(monkeypatch):
    monkeypatch.delenv(BIND_ENV, raising=False)
    with pytest.raises(SystemExit, match=f"{len(CORES) + 1} ranks .* lower --dp/--tp, or set {BIND_ENV}"):
        bind_rank_cores(len(CORES) + 1)
    assert BIND_ENV not in os.environ


def test_the_launcher_sets_the_binding_it_chose_and_keeps_a_given_one(monkeypatch, capsys):
    monkeypatch.setenv(BIND_ENV, "0|0")
    bind_rank_cores(2)
    assert os.environ[BIND_ENV] == "0|0"
    if len(CORES) >= 2:
        monkeypatch.delenv(BIND_ENV)
        bind_rank_cores(2)
        assert os.environ[BIND_ENV] == bind_groups(2, CORES)
        assert f"{BIND_ENV}={bind_groups(2, CORES)}" in capsys.readouterr().err


PIN_PROBE = """
import json, os, sys, threading, torch
from sglang_fair.binding.common.cpu_threads import pin_process
idle = threading.Event()
early = threading.Thread(target=idle.wait); early.start()  # started before pinning: must move too
torch.ones(64, 64) @ torch.ones(64, 64)  # the intra-op pool exists before pinning
try:
    pin_process(json.loads(sys.argv[1]))
except ValueError as exc:
    print(json.dumps({"error": str(exc)})); idle.set(); sys.exit(0)
threads = {tid: sorted(os.sched_getaffinity(int(tid))) for tid in os.listdir("/proc/self/task")}
idle.set()
print(json.dumps({"threads": threads, "intra_op": torch.get_num_threads()}))
"""


def _pin_in_a_fresh_process(cpus: list[int]) -> dict:
    out = subprocess.run([sys.executable, "-c", PIN_PROBE, json.dumps(cpus)], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_pinning_moves_every_thread_and_sizes_the_intra_op_pool():
    seen = _pin_in_a_fresh_process(CORES[:1])
    assert len(seen["threads"]) >= 2
    assert all(cpus == CORES[:1] for cpus in seen["threads"].values()), seen
    assert seen["intra_op"] == 1


def test_pinning_to_cores_this_process_may_not_use_is_refused():
    seen = _pin_in_a_fresh_process([max(CORES) + 1])
    assert BIND_ENV in seen["error"] and f"{max(CORES) + 1}" in seen["error"]
