"""Latency lanes of d2lpm_global: workers kept light for the clients under their fair share."""

from __future__ import annotations

import pytest

from sglang_fair.router import make_router
from sglang_fair.router.global_dlpm import GlobalDLPMRouter
from sglang_fair.router.lanes import DEFAULT_LANE_HOLD_S, Lanes

LANE = 1  # of two workers, the last is the lane
PROMPT, OUTPUT = 40, 10  # every request below holds 50 tokens where it runs


def _router(**options) -> GlobalDLPMRouter:
    options = {"quantum": 1e6, "local_queue_requests": 64, "local_queue_tokens": 100_000,
               "lane_workers": 1, "lane_tokens": 200} | options
    router = make_router("d2lpm_global", 2, **options)
    assert isinstance(router, GlobalDLPMRouter)
    return router


def _send(router: GlobalDLPMRouter, rid: str, client: str, first_token: int) -> int | None:
    """A request with a prompt of its own (no prefix shared with any other), admitted at once."""
    worker = router.route(rid, client, list(range(first_token, first_token + PROMPT)), OUTPUT)
    if worker is not None:
        router.on_admitted(rid, worker)
    return worker


def _flood(router: GlobalDLPMRouter, count: int, start: int = 0) -> list[int | None]:
    return [_send(router, f"f{i}", "flood", 100_000 + 1_000 * i) for i in range(start, start + count)]


def _on_lane(router: GlobalDLPMRouter, client: str) -> int:
    return router.lanes.held_by([client], LANE)


def test_a_client_over_its_share_holds_at_most_the_lane_budget_there() -> None:
    r = _router()
    _send(r, "l0", "light", 0)  # the light client has one request running
    placed = _flood(r, 20)
    # The lane takes the flood only while everything there holds under 200 tokens:
    # with the light request's 50, three of the flood's.
    assert placed.count(LANE) <= 4
    assert sum(r.lanes.held_by([c], LANE) for c in ("light", "flood")) <= 200
    assert placed.count(0) >= 16  # nothing is held back while the other worker has room
    assert r.snapshot().held_requests == 0


def test_a_lone_client_is_never_over_its_share_and_uses_every_worker() -> None:
    r = _router()
    assert _on_lane(r, "flood") == 0
    _flood(r, 20)
    assert _on_lane(r, "flood") > 200


def test_beside_a_flood_the_clients_under_their_share_go_to_the_lane() -> None:
    r = _router(affinity_ratio=None)  # no Preble rebalance: it alone would move them off a busy holder
    context = list(range(40))
    assert r.route("l0", "light", context + [1], OUTPUT) == 0  # its context is cached on worker 0
    r.on_admitted("l0", 0)
    _flood(r, 20)  # the flood holds ~800 tokens on worker 0, more than a lane allows: it floods
    for i in range(2, 6):
        # Worker 0 caches the context, but its batch is the flood's: the call goes to the lane.
        assert r.route(f"l{i}", "light", context + [i], OUTPUT) == LANE
        r.on_admitted(f"l{i}", LANE)


def test_without_a_flood_the_lane_is_an_ordinary_worker() -> None:
    r = _router()
    _send(r, "l0", "light", 0)
    _flood(r, 2)  # the flood is over its share but holds little elsewhere: no preference
    placed = {_send(r, f"g{i}", f"light-{i}", 1_000 * i) for i in range(1, 7)}
    assert placed == {0, LANE}


def test_finished_requests_give_their_lane_room_back() -> None:
    r = _router()
    _send(r, "l0", "light", 0)
    placed = _flood(r, 20)
    on_lane = [f"f{i}" for i, w in enumerate(placed) if w == LANE]
    assert on_lane and r.lanes.held_by(["flood"], LANE) == 50 * len(on_lane)
    for rid in on_lane:
        r.on_finish(rid, LANE, OUTPUT)
    assert _on_lane(r, "flood") == 0
    assert _flood(r, 1, start=20) == [LANE]  # room again: the lane takes a flood request


def test_a_light_client_between_two_calls_still_keeps_the_flood_off_the_lane() -> None:
    r = _router()
    now = [0.0]
    r.clock = lambda: now[0]
    _send(r, "l0", "light", 0)
    r.on_finish("l0", r.inflight["l0"].worker, OUTPUT)  # the light client has nothing in flight now
    now[0] = DEFAULT_LANE_HOLD_S / 2
    placed = _flood(r, 20)
    assert placed.count(LANE) <= 4, placed  # as if its next call were already there
    now[0] = 3 * DEFAULT_LANE_HOLD_S  # it has gone: the flood alone may use every worker
    assert _flood(r, 8, start=20).count(LANE) >= 4


def test_lane_hold_s_keeps_a_quiet_light_client_sharing_the_cluster_for_longer() -> None:
    r = _router(lane_hold_s=10.0)
    now = [0.0]
    r.clock = lambda: now[0]
    _send(r, "l0", "light", 0)
    r.on_finish("l0", r.inflight["l0"].worker, OUTPUT)
    now[0] = 3 * DEFAULT_LANE_HOLD_S  # quiet past the default hold, within this one
    placed = _flood(r, 20)
    assert placed.count(LANE) <= 4, placed
    now[0] = 11.0  # quiet past this hold too: the lane is the flood's
    assert _flood(r, 8, start=20).count(LANE) >= 4


def test_with_no_other_worker_alive_the_lane_serves_everyone() -> None:
    r = _router(local_queue_requests=1)
    _send(r, "l0", "light", 0)
    _flood(r, 6)
    r.on_worker_down(0)
    before = _on_lane(r, "flood")
    held = _flood(r, 8, start=6)
    assert all(w == LANE for w in held if w is not None)
    assert _on_lane(r, "flood") > max(before, 200)


def test_a_capped_client_does_not_wait_for_a_lane_that_caches_its_prefix() -> None:
    # While alone, the flood's template went to the lane (worker 0 was busier); beside a light
    # client the flood is over its share and the lane is full, so its template requests go to
    # worker 0 at once. Preble's exploit rule alone would hold them for the lightly loaded
    # lane that caches the template, and the lane would never take them.
    r = _router(lane_tokens=400)
    assert _send(r, "u0", "flood", 90_000) == 0
    template = list(range(5_000, 5_400))
    assert r.route("t0", "flood", template + [0], OUTPUT) == LANE
    r.on_admitted("t0", LANE)
    _send(r, "l0", "light", 0)
    placed = []
    for i in range(1, 4):
        placed.append(r.route(f"t{i}", "flood", template + [i], OUTPUT))
        r.on_admitted(f"t{i}", 0)
    assert placed == [0, 0, 0]


def test_lane_options_are_checked() -> None:
    for options, message in (({"lane_workers": 2}, "at least one other worker"),
                             ({"lane_workers": -1}, "lane_workers"), ({"lane_workers": True}, "lane_workers"),
                             ({"lane_workers": 1.0}, "lane_workers"), ({"lane_tokens": 0}, "lane_tokens"),
                             ({"lane_workers": 0, "lane_tokens": "big"}, "lane_tokens"),
                             ({"lane_hold_s": -1.0}, "lane_hold_s"), ({"lane_hold_s": float("inf")}, "lane_hold_s"),
                             ({"lane_hold_s": True}, "lane_hold_s"), ({"lane_hold_s": "1"}, "lane_hold_s")):
        with pytest.raises(ValueError, match=message):
            make_router("d2lpm_global", 2, **options)
    assert make_router("d2lpm_global", 2).lanes is None  # off by default


def test_the_ledger_forgets_finished_requests() -> None:
    lanes = Lanes(3, 1, 100)
    lanes.dispatched("a", "x", 2, 30)
    lanes.dispatched("b", "x", 2, 40)
    lanes.dispatched("c", "y", 0, 5)
    assert lanes.held_by(["x", "y"], 2) == 70 and lanes.held_by(["y"], 0) == 5
    for rid in ("a", "b", "c", "unknown"):
        lanes.finished(rid)
    assert lanes.held_by(["x", "y"], 2) == 0 and lanes._of == {} and lanes._held == [{}, {}, {}]
