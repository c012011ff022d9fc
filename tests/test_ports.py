"""Picking free TCP ports."""

from __future__ import annotations

import socket

from sglang_fair.ports import free_port_run, port_free


def test_a_bound_port_is_not_free_and_runs_avoid_it() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        assert not port_free("127.0.0.1", port)
        base = free_port_run("127.0.0.1", 4, low=port - 3, high=port + 8)  # must start past the taken port
        assert base > port and all(port_free("127.0.0.1", base + i) for i in range(4))
    assert port_free("127.0.0.1", port)
