"""``python -m sglang_fair.bench paper``: a quick figure of each paper end to end (run
directories, plot, a claims row with a computed number) and the errors for unknown names."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sglang_fair.bench.__main__ import main
from sglang_fair.bench.paper.registry import PAPERS, UnknownName, figures

REPO = Path(__file__).resolve().parents[3]


def _row(d: Path) -> dict:
    rows = json.loads((d / "claims.json").read_text())
    assert len(rows) == 1
    return rows[0]


def _computed(row: dict) -> None:
    """Every check of the row carries a number the run measured (not a placeholder)."""
    assert row["checks"], row
    values = [c["value"] for c in row["checks"]]
    assert any(isinstance(v, float | int) for v in values), row
    assert row["ours"] and row["ours"] != "n/a"
    assert row["held"] in (True, False, None)
    assert row["quick"] is True


def test_dlpm_figure_8_quick_writes_runs_plot_and_claim(tmp_path):
    # As a user runs it: a subprocess, the module's entry point.
    out = tmp_path / "paper"
    proc = subprocess.run([sys.executable, "-m", "sglang_fair.bench", "paper", "dlpm", "--figure", "8", "--quick",
                           "--out", str(out)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    d = out / "dlpm" / "fig8"
    assert (d / "fig8.png").stat().st_size > 10_000
    for system in ("rr-lpm", "vtc", "d2lpm"):
        assert (d / system / "records.jsonl").stat().st_size > 0
        assert (d / system / "summary.json").exists()
    row = _row(d)
    _computed(row)
    assert row["figure"] == "8" and "LPM" in row["metric"]
    assert "[dlpm fig 8]" in proc.stderr  # progress lines
    assert "| dlpm | 8 |" in proc.stdout
    assert json.loads((out / "dlpm" / "claims.json").read_text())[0]["figure"] == "8"


@pytest.mark.parametrize(("paper", "figure", "plot"), [("vtc", "3", "fig3.png"),
                                                     ("fairserve", "abuse", "figabuse.png"),
                                                     ("justitia", "starvation", "figstarvation.png")])
def test_a_quick_figure_of_each_other_paper(tmp_path, paper, figure, plot):
    assert main(["paper", paper, "--figure", figure, "--quick", "--no-progress", "--out", str(tmp_path)]) == 0
    d = tmp_path / paper / f"fig{figure}"
    assert (d / plot).stat().st_size > 10_000
    _computed(_row(d))


def test_separate_commands_make_one_paper_table(tmp_path):
    args = ["--quick", "--no-progress", "--out", str(tmp_path)]
    assert main(["paper", "justitia", "--figure", "starvation", *args]) == 0
    assert main(["paper", "fairserve", "--figure", "abuse", *args]) == 0
    assert main(["paper", "justitia", "--figure", "starvation", *args]) == 0
    rows = json.loads((tmp_path / "justitia" / "claims.json").read_text())
    assert [r["figure"] for r in rows] == ["starvation"]  # replaced, not appended twice


def test_unknown_names_list_the_valid_ones(capsys):
    assert main(["paper", "nosuch", "--all"]) == 2
    err = capsys.readouterr().err
    assert "unknown paper 'nosuch'" in err and "dlpm, vtc, fairserve, justitia" in err
    assert main(["paper", "dlpm", "--figure", "99"]) == 2
    err = capsys.readouterr().err
    assert "no figure '99'" in err and "1, 7, 8, 9, 10, 11, 12" in err
    assert main(["paper", "dlpm"]) == 2
    assert "give --figure N or --all" in capsys.readouterr().err


def test_registry_covers_the_papers_figures():
    assert list(PAPERS["dlpm"]) == ["1", "7", "8", "9", "10", "11", "12"]
    assert list(PAPERS["vtc"]) == ["3", "4", "5", "7", "9", "10"]
    assert [f.name for f in figures("dlpm", ["fig8", "8"])] == ["8"]
    with pytest.raises(UnknownName):
        figures("vtc", ["8"])
