"""Workload names -> generators, and building a Workload from a scenario."""

from __future__ import annotations

from typing import Callable

from sglang_fair.workloads import apps, chat, judge, qa, synthetic, tot
from sglang_fair.workloads.context import GenContext
from sglang_fair.workloads.model import Program, Workload
from sglang_fair.workloads.spec import ClientSpec, Scenario, load_scenario, scenario_path
from sglang_fair.workloads.validate import WorkloadError, check_workload

Generator = Callable[[ClientSpec, GenContext], list[Program]]

GENERATORS: dict[str, Generator] = {
    "tot": tot.generate,
    "qa": qa.generate,
    "judge": judge.generate,
    "chat": chat.generate,
    "synthetic": synthetic.generate,
    "apps": apps.generate,
}


def build_workload(scenario: Scenario) -> Workload:
    gen = GENERATORS.get(scenario.workload)
    if gen is None:
        raise WorkloadError(f"unknown workload {scenario.workload!r}: expected one of {', '.join(sorted(GENERATORS))}")
    ctx = GenContext(seed=scenario.seed, vocab_size=scenario.vocab_size)
    programs: list[Program] = []
    for client in scenario.clients:
        programs.extend(gen(client, ctx))
    programs.sort(key=lambda p: (p.arrival, p.program_id))
    workload = Workload(
        name=scenario.name,
        programs=programs,
        seed=scenario.seed,
        meta={"workload": scenario.workload, "vocab_size": scenario.vocab_size, "source": scenario.source},
    )
    check_workload(workload)
    return workload


def make_workload(workload: str, scenario: str, overrides: dict | None = None, seed: int | None = None) -> Workload:
    """``--workload W --scenario S`` -> Workload (S: name under configs/ or a yaml path)."""
    if workload not in GENERATORS:
        raise WorkloadError(f"unknown workload {workload!r}: expected one of {', '.join(sorted(GENERATORS))}")
    sc = load_scenario(scenario_path(workload, scenario), overrides, seed)
    if sc.workload != workload:
        raise WorkloadError(f"scenario {sc.source} is for workload {sc.workload!r}, not {workload!r}")
    return build_workload(sc)
