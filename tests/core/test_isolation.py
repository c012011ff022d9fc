"""Latency isolation (core/isolation.py): the share rule, victim order, charging once, no ping-pong."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sglang_fair.core import FairOptions, FairScheduler, RequestState
from sglang_fair.core.options import OptionError


def _scheduler(**options) -> FairScheduler:
    return FairScheduler(FairOptions(policy="dlpm", isolation=True, **options), clock=lambda: 0.0)


def _running(fair: FairScheduler, client: str, n: int, input_len: int = 100, prefix: str = ""):
    out = []
    for i in range(n):
        req = fair.enqueue(f"{prefix}{client}-{i}", client, input_len)
        fair.admit(req, 0)
        out.append(req)
    return out


def test_off_by_default_and_options_are_checked():
    assert FairScheduler(FairOptions(policy="dlpm")).isolation is None
    with pytest.raises(OptionError, match="--fair-max-preemptions"):
        FairOptions(isolation=True, max_preemptions=0)
    with pytest.raises(OptionError, match="--fair-isolation"):
        FairOptions(isolation="yes")


def test_share_rule_and_starved_clients():
    fair = _scheduler()
    iso = fair.isolation
    _running(fair, "flood", 4)
    fair.enqueue("flood-q", "flood", 100)
    light = fair.enqueue("light-0", "light", 10)
    assert iso.may_take_from("light", "flood") and not iso.may_take_from("flood", "flood")
    assert iso.starved_clients() == {"light"}  # the flood cannot take from itself
    _running(fair, "light", 2, prefix="r")
    assert iso.may_take_from("light", "flood")  # 4 - 1 >= 2 + 1
    _running(fair, "light", 1, prefix="s")
    assert not iso.may_take_from("light", "flood") and iso.starved_clients() == set()  # 3 < 4
    assert light.state is RequestState.QUEUED


def test_a_light_client_running_beside_waiting_prompts_decodes_first():
    fair = _scheduler()
    iso = fair.isolation
    _running(fair, "flood", 6)
    assert not iso.decode_first()  # nobody waits
    fair.enqueue("flood-q", "flood", 100)
    assert not iso.decode_first()  # the flood is the only client running
    light = _running(fair, "light", 1)
    assert iso.decode_first()  # 1 + 1 <= R / W = 7 / 2
    fair.enqueue("light-q", "light", 10)
    assert not iso.decode_first()  # a client with a request queued is admitted by the walk, not helped here
    fair.admit(fair.requests["light-q"], 0)
    assert iso.decode_first()
    _running(fair, "light", 3, prefix="more")
    assert not iso.decode_first()  # 5 + 1 > R / W = 11 / 2: the light client has its share
    fair.finish(light[0])
    assert iso.decode_first()  # 4 + 1 <= 10 / 2


def test_a_prefill_for_a_client_within_its_share_goes_before_a_light_clients_decode():
    fair = _scheduler()
    iso = fair.isolation
    _running(fair, "a", 2)
    fair.enqueue("a-q", "a", 100)
    _running(fair, "b", 1)
    _running(fair, "c", 3)
    assert not iso.decode_first()  # R / W = 2: b is light, but a waits within its share
    fair.enqueue("c-q", "c", 100)
    assert iso.decode_first()  # c runs 3 > 2 and waits


def test_decode_turns_come_a_chunk_of_prefill_apart_while_a_light_client_runs():
    from sglang_fair.core.isolation import DecodeTurns

    fair = _scheduler()
    turns = DecodeTurns(fair.isolation, chunk_tokens=100)
    _running(fair, "flood", 6)
    fair.enqueue("flood-q", "flood", 100)
    light = _running(fair, "light", 1)
    turns.after_prefill(60)
    turns.after_prefill(39)
    assert not turns.due()  # 99 tokens: less than a chunk
    turns.after_prefill(1)
    assert turns.due()
    fair.finish(light[0])
    assert not turns.due()  # nobody light to decode for
    _running(fair, "light", 1, prefix="again")
    assert turns.due()
    turns.take()
    assert not turns.due() and turns.taken == 1
    turns.after_prefill(100)
    turns.after_decode()
    assert not turns.due() and turns.taken == 1
    with pytest.raises(ValueError, match="chunk_tokens"):
        DecodeTurns(fair.isolation, chunk_tokens=0)


def test_weights_scale_the_share():
    fair = _scheduler(client_weights={"gold": 4.0})
    _running(fair, "flood", 4)
    _running(fair, "gold", 2)
    fair.enqueue("gold-q", "gold", 10)
    # per weight: flood 4 -> 3 vs gold 2/4 -> 3/4
    assert fair.isolation.may_take_from("gold", "flood")
    assert not fair.isolation.may_take_from("flood", "gold")


def test_victims_come_from_the_largest_holder_least_output_first_and_at_most_max_preemptions():
    fair = _scheduler(max_preemptions=1)
    big = _running(fair, "big", 5)
    mid = _running(fair, "mid", 3)
    for req, out in zip(big, (9, 3, 7, 3, 8)):
        fair.produced(req, out)
    light = fair.enqueue("light-0", "light", 10)
    running = big + mid
    victim = fair.isolation.next_victim(light, running)
    assert victim is big[3]  # least output among the largest holder's, the later of the ties
    fair.preempt(victim)
    assert fair.isolation.next_victim(light, running) is big[1]
    fair.preempt(big[1])
    # big now holds 3 like mid; mid received less service, so big still goes first (more service)
    assert fair.isolation.next_victim(light, running).client == "big"
    # a preempted request re-admitted is never preempted again (max_preemptions=1)
    fair.admit(big[3], 0)
    assert fair.isolation.next_victim(light, [big[3]]) is None
    with pytest.raises(ValueError, match="not running"):
        fair.preempt(light)


def test_preemption_charges_nothing_and_recompute_is_waste_not_service():
    fair = _scheduler()
    (victim,) = _running(fair, "flood", 1, input_len=100)
    fair.produced(victim, 10)
    service = fair.ledger.service("flood")
    deficit = fair.policy.counter("flood")
    fair.preempt(victim)
    assert victim.state is RequestState.QUEUED and fair.activity["flood"].queued == 1
    assert fair.ledger.service("flood") == service and fair.policy.counter("flood") == deficit
    # Re-admitted with its 100-token prompt cached: the 10 outputs are prefilled again.
    assert fair.admit(victim, 100) == 0.0
    entry = fair.ledger.get("flood")
    assert (entry.recomputed_tokens, entry.preempted, entry.service) == (10, 1, service)
    fair.produced(victim, 10)  # the engine reports the same cumulative count: no charge
    assert fair.ledger.service("flood") == service
    fair.produced(victim, 12)
    assert fair.ledger.service("flood") == service + 2 * 2.0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 8), min_size=2, max_size=5), st.integers(0, 10_000))
def test_preemptions_cannot_ping_pong(counts, seed):
    """Each preemption lowers sum(running^2 / weight): with no admission or completion in
    between, preemptions alone stop after finitely many steps (no two clients trade a slot back)."""
    rng = random.Random(seed)
    fair = _scheduler()
    clients = [f"c{i}" for i in range(len(counts))]
    running = []
    for client, n in zip(clients, counts):
        running += _running(fair, client, n)
        fair.enqueue(f"{client}-q", client, 10)  # every client has a request waiting

    def potential() -> int:
        return sum(fair.activity[c].running ** 2 for c in clients)

    for step in range(sum(counts) + 1):
        starved = sorted(fair.isolation.starved_clients())
        if not starved:
            break
        client = rng.choice(starved)
        candidate = next(r for r in fair.requests.values() if r.client == client and r.state is RequestState.QUEUED)
        victim = fair.isolation.next_victim(candidate, running)
        assert victim is not None  # starved means some victim is allowed
        before = potential()
        fair.preempt(victim)
        fair.admit(candidate, 0)
        assert potential() <= before - 2
        fair.enqueue(f"{client}-q{step}", client, 10)
        running.append(candidate)
    assert not fair.isolation.starved_clients()


def test_the_walk_offers_room_to_starved_clients_first_then_to_everyone():
    fair = FairScheduler(FairOptions(policy="vtc", isolation=True), clock=lambda: 0.0)
    _running(fair, "flood", 3)
    flood_q = fair.enqueue("flood-q", "flood", 10)
    light_q = fair.enqueue("light-q", "light", 10)
    fair.policy.counters["light"] = 1e9  # VTC alone would offer the flood first
    queue = [flood_q, light_q]
    assert [r.rid for r in fair.walk(queue)] == ["flood-q", "light-q"]
    assert [r.rid for r in fair.walk(queue, {"light"})][:2] == ["light-q", "flood-q"]
