"""The pool of real servers the tests share (tests/support/servers.py), with a stand-in for LocalServer."""

from __future__ import annotations

import pytest

from tests.support import servers


class StandIn:
    started: list[tuple] = []

    def __init__(self, extra_args, env, **options) -> None:
        self.extra_args, self.env, self.options, self.code = extra_args, env, options, None

    def start(self) -> "StandIn":
        if "--broken" in self.extra_args:
            raise RuntimeError("would not start")
        StandIn.started.append(tuple(self.extra_args))
        return self

    def poll(self):
        return self.code

    def log_tail(self) -> str:
        return "the log"

    def stop(self) -> None:
        self.code = 0


@pytest.fixture
def pool(monkeypatch):
    StandIn.started = []
    monkeypatch.setattr(servers, "LocalServer", StandIn)
    return servers.ServerPool()


def test_one_server_per_set_of_settings_started_on_first_use(pool):
    a = pool.get(["--policy", "dlpm"], skip_tokenizer_init=True)
    assert pool.get(["--policy", "dlpm"], skip_tokenizer_init=True) is a
    assert pool.get(["--policy", "dlpm"], skip_tokenizer_init=False) is not a
    assert pool.get(["--policy", "dlpm"], env={"X": "1"}, skip_tokenizer_init=True) is not a
    assert len(StandIn.started) == 3
    pool.stop_all()
    assert a.code == 0


def test_a_shared_server_that_exited_fails_the_test_that_asks_for_it(pool):
    server = pool.get(["--policy", "dlpm"])
    server.code = -9
    with pytest.raises(pytest.fail.Exception, match="exited with code -9"):
        pool.get(["--policy", "dlpm"])


def test_a_server_that_did_not_start_is_not_started_again(pool):
    with pytest.raises(RuntimeError):
        pool.get(["--broken"])
    with pytest.raises(pytest.fail.Exception, match="did not start:\nwould not start"):
        pool.get(["--broken"])
    assert StandIn.started == []


class _Item:
    def __init__(self, nodeid: str, fixturenames: tuple[str, ...]) -> None:
        self.nodeid, self.fixturenames = nodeid, fixturenames


class _Request:
    def __init__(self, items: list[_Item], node: _Item, stash: pytest.Stash) -> None:
        self.session = type("Session", (), {"items": items, "stash": stash})()
        self.node = node


def test_a_shared_server_is_stopped_after_the_last_test_that_uses_it(pool):
    items = [_Item("a", ("shared",)), _Item("b", ()), _Item("c", ("other", "shared")), _Item("d", ("other",))]
    stash = pytest.Stash()
    server = pool.get(["--policy", "dlpm"])
    pool.release_after_last_user(_Request(items, items[0], stash), "shared", server)
    assert server.code is None and pool.get(["--policy", "dlpm"]) is server  # c still needs it
    pool.release_after_last_user(_Request(items, items[2], stash), "shared", server)
    assert server.code == 0  # c was the last: stopped
    again = pool.get(["--policy", "dlpm"])
    assert again is not server and len(StandIn.started) == 2  # asked again: a fresh one
