"""The workers' reports to the router: typed, and a malformed one is refused whole."""

from __future__ import annotations

import msgspec
import pytest

from sglang_fair.binding.common.worker_reports import Admitted, Beat, Done, Hello, Progress, decoder, encoder


@pytest.mark.parametrize("report", [Hello(0, 1234), Done(1, [("r1", "alice", 12)]), Admitted(0, [("r2", 300)]),
                                    Progress(1, [("r3", 8), ("r4", 0)]), Beat(0)])
def test_every_report_round_trips(report) -> None:
    assert decoder.decode(encoder.encode(report)) == report


@pytest.mark.parametrize("wire", [("done", 0, [("r1", "alice", -3)]), ("done", -1, []), ("progress", 0, [("r1",)]),
                                  ("admitted", 0, [(5, 3)]), ("hello", 0, "pid"), ("what", 0, 1), ("done", 0)])
def test_a_malformed_report_is_refused(wire) -> None:
    with pytest.raises(msgspec.ValidationError):
        decoder.decode(msgspec.msgpack.encode(wire))
