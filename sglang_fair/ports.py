"""Free TCP ports on this machine, for the sockets the server and the router bind."""

from __future__ import annotations

import random
import socket


def port_free(host: str, port: int) -> bool:
    """Whether ``port`` can be bound on ``host`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port_run(host: str, count: int, low: int = 20000, high: int = 60000) -> int:
    """First of ``count`` consecutive free ports on ``host``, in [low, high)."""
    for _ in range(50):
        base = random.randrange(low, high - count)
        if all(port_free(host, base + i) for i in range(count)):
            return base
    raise RuntimeError(f"no {count} consecutive free ports on {host}")
