"""Unique inproc addresses for tests that bind ZeroMQ sockets.

A closed socket's inproc name is released asynchronously and ``id()`` values
are reused, so a name derived from ``id(obj)`` can still be taken when the next
test binds it.
"""

import uuid


def fresh_inproc(name: str) -> str:
    """A ZeroMQ inproc address no other socket in this process has bound."""
    return f"inproc://{name}-{uuid.uuid4().hex}"
