"""sglang_fair/bench/paper/claims.py: held / not held / not shown on made-up numbers."""

import json

import pytest

from sglang_fair.bench.paper.claims import Check, evaluate, make_row, markdown, read_claims, write_claims


def test_check_compares_both_ways():
    assert Check("a / b", 0.4, "<=", 0.5).held is True
    assert Check("a / b", 0.6, "<=", 0.5).held is False
    assert Check("a / b", 1.31, ">=", 1.3).held is True
    assert Check("a / b", 1.29, ">=", 1.3).held is False
    assert Check("a / b", None, ">=", 1.3).held is None
    assert Check("a / b", float("nan"), ">=", 1.3).held is None
    with pytest.raises(ValueError, match="op must be"):
        Check("a / b", 1.0, "<", 1.0)


def test_all_checks_must_hold_and_a_failure_names_its_number():
    held, reason = evaluate([Check("x", 0.4, "<=", 0.5), Check("y", 1.5, ">=", 1.3)])
    assert held is True and reason == ""
    held, reason = evaluate([Check("x", 0.4, "<=", 0.5), Check("D2LPM / VTC", 0.82, "<=", 0.7)])
    assert held is False
    assert "D2LPM / VTC = 0.82, not <= 0.7" in reason and "x =" not in reason


def test_unmeasured_is_not_shown_not_held():
    held, reason = evaluate([Check("x", 0.4, "<=", 0.5), Check("y", None, ">=", 1.3)])
    assert held is None and "not measured: y" in reason
    assert evaluate([]) == (None, "nothing measured")
    # A failure still wins over a missing number: the claim is refuted by what was measured.
    assert evaluate([Check("x", 0.9, "<=", 0.5), Check("y", None, ">=", 1.3)])[0] is False


def test_failed_precondition_means_the_scale_could_not_show_the_claim():
    checks = [Check("flooders backlogged", 0.1, ">=", 0.25, pre=True), Check("x", 0.9, "<=", 0.5)]
    held, reason = evaluate(checks)
    assert held is None and reason.startswith("not shown at this scale: flooders backlogged = 0.1")
    checks[0] = Check("flooders backlogged", 0.8, ">=", 0.25, pre=True)
    assert evaluate(checks)[0] is False


def test_rows_round_trip_and_render(tmp_path):
    rows = [make_row("dlpm", "9", "D2LPM finishes first", [Check("D2LPM / VTC", 0.5, "<=", 0.7)], "sim H100",
                     tmp_path, quick=True),
            make_row("dlpm", "11", "DLPM near LPM", [Check("DLPM / LPM", 0.9, ">=", 0.95)], "sim H100",
                     tmp_path, quick=True, note="5 clients worst")]
    md, js = write_claims(rows, tmp_path)
    assert read_claims(js) == rows
    data = json.loads(js.read_text())
    assert [r["held"] for r in data] == [True, False]
    assert data[1]["reason"] == "DLPM / LPM = 0.9, not >= 0.95; 5 clients worst"
    text = markdown(rows)
    assert "| dlpm | 9 |" in text and "| held |" in text and "| not held |" in text
    assert "1 of 2 claims held; quick" in text
    assert md.read_text().startswith("# Claims")
