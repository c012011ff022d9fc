"""The demo's side-by-side table (the demo itself is README's main command)."""

from __future__ import annotations

from sglang_fair.bench.report import client_table


def _summary(service: dict[str, float], p50: dict[str, float]) -> dict:
    return {"clients": {c: {"well_behaved": c != "flooder", "service": service[c],
                            "program_latency_s": {"p50": p50[c]},
                            "request_latency_s": {"max": p50[c] * 2}} for c in service}}


def test_client_table_puts_policies_side_by_side():
    table = client_table({
        "lpm": _summary({"flooder": 900.0, "light": 10.0}, {"flooder": 1.0, "light": 60.0}),
        "dlpm": _summary({"flooder": 800.0, "light": 110.0}, {"flooder": 3.0, "light": 2.5}),
    })
    lines = table.splitlines()
    assert "lpm service" in lines[0] and "dlpm done" in lines[0] and "dlpm wait" in lines[0]
    light = next(line for line in lines if line.startswith("light"))
    assert "60.0s" in light and "120.0s" in light and "2.5s" in light and "5.0s" in light and "110.0" in light
    assert next(line for line in lines if line.startswith("flooder")).split()[1] == "NO"


def test_the_verdict_names_what_a_run_lacks_to_be_audited(tmp_path):
    from sglang_fair.bench.report import verdict

    assert verdict(tmp_path / "nowhere").startswith("fairness audit: not possible: ")
    assert "not a directory" in verdict(tmp_path / "nowhere")


def test_bench_run_ends_in_the_client_table_and_the_verdict(tmp_path, capsys):
    from sglang_fair.bench.__main__ import main as bench_main
    from sglang_fair.bench.audit import audit_fields
    from sglang_fair.bench.report import verdict

    run = tmp_path / "sim"
    assert bench_main(["run", "--workload", "tot", "--scenario", "s1", "--policy", "dlpm", "--backend", "sim",
                       "--num-programs", "1", "--out", str(run), "--no-progress"]) == 0
    fields = audit_fields(run)
    line = verdict(run)
    printed = capsys.readouterr().out.splitlines()
    assert any(row.startswith("client ") and "dlpm service" in row for row in printed)
    assert printed[-1] == line
    assert f"{fields['gap']:,.0f} vs bound {fields['bound']:,.0f}" in line
    assert line.endswith("within the bound") == fields["within"]


def test_overall_line_reads_the_summary():
    from sglang_fair.bench.report import overall_line

    summary = {"overall": {"jain_index": 0.91, "cache_hit_rate": 0.5, "requests_ok": 9, "requests": 10}}
    assert overall_line("dlpm", summary) == "dlpm: Jain 0.9, cache hit rate 50.0%, 9/10 requests ok"
