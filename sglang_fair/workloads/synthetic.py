"""Synthetic single-request workloads for the VTC paper's §5.2 experiments.

Each request is a one-call program with ``input_tokens`` random ids
(optionally after a per-client shared prefix) and ``output_tokens`` forced
output tokens. Arrivals follow the client's process (uniform, poisson, gamma
with cv) and either a count (``num_programs`` at ``rate``) or, when
``duration`` or ``phases`` is given, a time schedule (the count follows):

* ``duration`` with ``end_rate``: a linear rate ramp from ``rate``;
* ``duration`` with ``on_off: [on_s, off_s]``: alternating ON (``rate``)
  and OFF (no requests) phases, starting ON;
* ``phases``: a list of ``{duration, rate, end_rate}`` (distribution shift).

Rates are requests per second (the VTC paper quotes per minute: 30/min = 0.5/s).
"""

from __future__ import annotations

from dataclasses import dataclass

from sglang_fair.workloads.arrivals import Phase, arrival_times
from sglang_fair.workloads.context import GenContext, positive
from sglang_fair.workloads.model import Call, Program
from sglang_fair.workloads.spec import ClientSpec, build_params
from sglang_fair.workloads.validate import WorkloadError


@dataclass
class SyntheticParams:
    input_tokens: int = 256
    output_tokens: int = 256
    shared_prefix_tokens: int = 0  # same prefix on every request of the client
    duration: float | None = None
    end_rate: float | None = None
    on_off: list[float] | None = None
    phases: list[dict] | None = None

    def check(self) -> None:
        positive("input_tokens", self.input_tokens)
        positive("output_tokens", self.output_tokens)
        positive("shared_prefix_tokens", self.shared_prefix_tokens, allow_zero=True)
        if self.duration is not None:
            positive("duration", self.duration, integer=False)
        if self.end_rate is not None:
            positive("end_rate", self.end_rate, integer=False, allow_zero=True)
        if self.on_off is not None:
            if not (isinstance(self.on_off, list) and len(self.on_off) == 2):
                raise ValueError("on_off must be [on_seconds, off_seconds]")
            for v in self.on_off:
                positive("on_off periods", v, integer=False)
            if self.duration is None:
                raise ValueError("on_off needs a duration")
        if self.end_rate is not None and self.duration is None:
            raise ValueError("end_rate needs a duration")
        if self.phases is not None and (self.duration is not None):
            raise ValueError("give either phases or duration, not both")

    def schedule(self, rate: float) -> list[Phase] | None:
        if self.phases is not None:
            if not isinstance(self.phases, list):
                raise ValueError("phases must be a list of {duration, rate, end_rate}")
            try:
                return [Phase(**ph) for ph in self.phases]
            except TypeError as e:
                raise ValueError(f"bad phase: {e}") from e
        if self.duration is None:
            return None
        if self.on_off is None:
            return [Phase(self.duration, rate, self.end_rate)]
        on, off = self.on_off
        phases, t, is_on = [], 0.0, True
        while t < self.duration:
            d = min(on if is_on else off, self.duration - t)
            phases.append(Phase(d, rate if is_on else 0.0))
            t, is_on = t + d, not is_on
        return phases


def generate(client: ClientSpec, ctx: GenContext) -> list[Program]:
    p: SyntheticParams = build_params(SyntheticParams, client.params, f"synthetic client {client.name!r}")
    try:
        phases = p.schedule(client.rate)
        times = (ctx.arrivals(client) if phases is None else
                 arrival_times(ctx.rng("arrivals", client.name), phases, client.arrival, client.cv))
    except ValueError as e:
        raise WorkloadError(f"synthetic client {client.name!r}: {e}") from e
    rng = ctx.rng("synthetic", client.name)
    prefix = ctx.ids(rng, p.shared_prefix_tokens)
    return [
        Program(program_id=f"{client.name}/r{k}", client=client.name, arrival=t,
                calls=(Call(tokens=prefix + ctx.ids(rng, p.input_tokens), max_new_tokens=p.output_tokens),),
                well_behaved=client.well_behaved, kind="synthetic")
        for k, t in enumerate(times)
    ]
