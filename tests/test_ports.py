"""Picking free TCP ports."""

from __future__ import annotations

import socket

import pytest

from sglang_fair.ports import PICK_LOW, ephemeral_low, free_port_run, port_free


def test_a_bound_port_is_not_free_and_runs_avoid_it() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        assert not port_free("127.0.0.1", port)
        base = free_port_run("127.0.0.1", 4, low=port - 3, high=port + 8)  # must start past the taken port
        assert base > port and all(port_free("127.0.0.1", base + i) for i in range(4))
    assert port_free("127.0.0.1", port)


def test_picked_ports_stay_below_the_ports_the_os_and_sglang_hand_out() -> None:
    # A port in the ephemeral range can go to any outgoing connection before the
    # server binds it; SGLang picks its own processes' ports from 22000 up.
    for _ in range(20):
        base = free_port_run("127.0.0.1", 2)
        assert PICK_LOW <= base and base + 2 <= min(22000, ephemeral_low())


def test_an_empty_range_is_refused() -> None:
    with pytest.raises(RuntimeError, match="no room for 4 ports"):
        free_port_run("127.0.0.1", 4, low=30000, high=30003)


def test_an_ipv6_host_is_checked_as_ipv6() -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as taken:
        try:
            taken.bind(("::1", 0))
        except OSError:
            pytest.skip("IPv6 loopback not configured")
        port = taken.getsockname()[1]
        assert not port_free("::1", port)
    assert port_free("::1", port)


def test_a_stopped_servers_port_is_free_at_once_despite_time_wait() -> None:
    """A server that closed its clients' connections first leaves them in TIME_WAIT on its port
    for a minute; its successor binds it with SO_REUSEADDR, and so must the check."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    served, _ = listener.accept()
    served.close()  # the server closes first: TIME_WAIT on the server's port
    client.recv(1)
    client.close()
    listener.close()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as plain:
        with pytest.raises(OSError):  # what the check did before: refused for a minute
            plain.bind(("127.0.0.1", port))
    assert port_free("127.0.0.1", port)
