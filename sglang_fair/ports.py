"""Free TCP ports on this machine, for the sockets the server and the router bind.

A port picked now is bound seconds later, once the server has started. Ports
from the kernel's ephemeral range (what ``bind(0)`` returns) can meanwhile be
handed to any outgoing connection, the health checks included, and the server
then fails to bind. So ports are picked below that range, below the range
SGLang picks its own processes' ports from (22000 and up), and above Ray's
worker ports (10002-19999, taken by a Ray cluster's workers as they start).
"""

from __future__ import annotations

import random
import socket

PICK_LOW = 20000  # above Ray's default max_worker_port (19999)
_SGLANG_LOW = 22000  # sglang.srt.utils.network.get_free_port_below_ephemeral's lowest port
_EPHEMERAL_RANGE = "/proc/sys/net/ipv4/ip_local_port_range"


def port_free(host: str, port: int) -> bool:
    """Whether a server can bind ``port`` on ``host`` (a name, or an IPv4 or IPv6 address) right now.

    Bound as uvicorn and ZMQ bind their listeners, with SO_REUSEADDR: connections
    of a server just stopped that linger in TIME_WAIT do not keep its successor out.
    """
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def ephemeral_low() -> int:
    """The lowest port the kernel hands out to ``bind(0)`` and ``connect()``."""
    try:
        with open(_EPHEMERAL_RANGE) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def free_port_run(host: str, count: int, low: int = PICK_LOW, high: int | None = None) -> int:
    """First of ``count`` consecutive free ports on ``host``, in [low, high).

    ``high`` defaults to the lower of SGLang's own range and the ephemeral range.
    """
    if high is None:
        high = min(_SGLANG_LOW, ephemeral_low())
    if high - count <= low:
        raise RuntimeError(f"no room for {count} ports in [{low}, {high})")
    for _ in range(50):
        base = random.randrange(low, high - count)
        if all(port_free(host, base + i) for i in range(count)):
            return base
    raise RuntimeError(f"no {count} consecutive free ports on {host} in [{low}, {high})")
