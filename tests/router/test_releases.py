"""The placements a holding router keeps for its backend (router/releases.py)."""

from sglang_fair.router.releases import Releases


def test_the_routed_request_is_claimed_and_the_others_are_taken_in_placement_order() -> None:
    releases = Releases()
    for rid, worker in (("a", 1), ("b", 0), ("c", 1)):
        releases.add(rid, worker)
    assert releases.claim("b") == 0
    assert releases.claim("b") is None  # claimed once
    assert releases.claim("held") is None  # never placed
    assert releases.take() == [("a", 1), ("c", 1)]
    assert releases.take() == [] and len(releases) == 0
