"""Settings changed while the scheduler runs: parsed at the edge, applied from the next pass."""

from __future__ import annotations

import re

import pytest

from sglang_fair.core import FairOptions, FairScheduler, OptionError, SettingsUpdate


@pytest.mark.parametrize("body, named", [
    (None, "JSON object"),
    ({}, "JSON object"),
    ({"quantum": 1, "policy": "vtc"}, "'policy' cannot be changed"),
    ({"quantum": -5}, "quantum"),
    ({"quantum": True}, "quantum"),
    ({"quantum": "big"}, "quantum"),
    ({"client_weights": ["alice", 2]}, "client_weights"),
    ({"client_weights": {"alice": 0}}, "client_weights['alice']"),
    ({"client_weights": {"alice": float("inf")}}, "client_weights['alice']"),
    # An id the identity rule would rewrite names no client anyone sends as: refused, naming it.
    ({"client_weights": {"": 2}}, "invalid client id(s) ''"),
    ({"client_weights": {"alice": 2, "a b": 2, "é": 3}}, "invalid client id(s) 'a b', 'é'"),
    ({"client_weights": {"x" * 65: 2}}, "invalid client id"),
])
def test_bad_updates_are_refused_naming_the_field(body, named) -> None:
    with pytest.raises(OptionError, match=re.escape(named)):
        SettingsUpdate.parse(body)


def test_an_update_round_trips_through_json_with_normalized_client_ids() -> None:
    update = SettingsUpdate.parse({"quantum": 512, "client_weights": {" alice ": 2, "bob": 0.5}})
    assert update == SettingsUpdate(512.0, {"alice": 2.0, "bob": 0.5})
    assert SettingsUpdate.parse(update.as_json()) == update
    assert SettingsUpdate.parse({"client_weights": {"carol": 3}}).quantum is None


def test_weights_merge_and_apply_to_the_next_charge() -> None:
    fair = FairScheduler(FairOptions(policy="vtc", client_weights={"alice": 2.0, "bob": 3.0}))
    settings = fair.update_settings(SettingsUpdate.parse({"client_weights": {"alice": 4}}))
    assert settings["client_weights"] == {"alice": 4.0, "bob": 3.0}  # bob keeps his
    req = fair.enqueue("r", "alice", 100)
    before = fair.policy.counter("alice")
    cost = fair.admit(req, 0)
    assert fair.policy.counter("alice") - before == pytest.approx(cost / 4)


def test_a_null_weight_removes_the_clients_weight() -> None:
    fair = FairScheduler(FairOptions(policy="vtc", client_weights={"alice": 2.0, "bob": 3.0}))
    update = SettingsUpdate.parse({"client_weights": {"alice": None, "~0123456789abcdef": 2}})
    assert SettingsUpdate.parse(update.as_json()) == update
    settings = fair.update_settings(update)
    assert settings["client_weights"] == {"bob": 3.0, "~0123456789abcdef": 2.0}
    req = fair.enqueue("r", "alice", 100)
    before = fair.policy.counter("alice")
    cost = fair.admit(req, 0)
    assert fair.policy.counter("alice") - before == pytest.approx(cost)  # weight 1 again


def test_dlpm_refills_by_the_new_quantum() -> None:
    fair = FairScheduler(FairOptions(policy="dlpm", quantum=100))
    fair.update_settings(SettingsUpdate.parse({"quantum": 5000}))
    req = fair.enqueue("r", "alice", 10)
    assert [r.rid for r in fair.walk(fair.order([req]))] == ["r"]  # CHECKREFILL gave alice Q^u
    assert fair.policy.counter("alice") == 5000.0
    assert fair.settings()["quantum"] == 5000.0


@pytest.mark.parametrize("throttle, named", [
    ("tight", "throttle must be an object"),
    ({"window_s": 5}, "'window_s' cannot be changed"),
    ({"overload_kv_usage": 1.5}, "overload_kv_usage"),
    ({"user_limit": 0}, "user_limit"),
    ({"user_limits": {"bob": 2.5}}, "user_limits"),
])
def test_bad_throttle_limits_are_refused_naming_the_field(throttle, named) -> None:
    with pytest.raises(OptionError, match=named):
        SettingsUpdate.parse({"throttle": throttle})


def test_fairserve_throttles_by_the_new_limits() -> None:
    now = [0.0]
    fair = FairScheduler(FairOptions(policy="fairserve"), clock=lambda: now[0])
    assert fair.check_arrival("alice", kv_usage=0.5) is None  # under the default overload threshold
    settings = fair.update_settings(SettingsUpdate.parse(
        {"throttle": {"overload_kv_usage": 0.0, "user_limit": 1, "user_limits": {"vip": 5}}}))
    assert settings["throttle"]["user_limit"] == 1 and settings["throttle"]["user_limits"] == {"vip": 5}
    assert fair.check_arrival("alice", kv_usage=0.5) is not None  # her second arrival in the window: over 1
    assert fair.check_arrival("vip", kv_usage=0.5) is None


def test_throttle_limits_on_a_policy_that_does_not_throttle_change_nothing() -> None:
    fair = FairScheduler(FairOptions(policy="dlpm", quantum=100))
    with pytest.raises(OptionError, match="does not throttle"):
        fair.update_settings(SettingsUpdate.parse({"quantum": 9000, "throttle": {"user_limit": 3}}))
    assert fair.settings()["quantum"] == 100 and "throttle" not in fair.settings()
