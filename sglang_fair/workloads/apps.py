"""Multi-application workloads (FairServe §5, Justitia §V): each client runs
interactions of named applications with their own token profiles.

A program is one interaction (FairServe) / application run (Justitia) of an
application drawn from the client's ``apps`` by weight; ``Program.kind`` is
the application name, which the backends send as the application identity.
Each application is a mapping::

    {name: summarize, weight: 1, calls: [1, 1], input: [10000, 14000],
     output: [50, 100], system: 800, shape: sequential}

* ``calls``, ``input``, ``output``: inclusive [low, high] ranges drawn
  uniformly per interaction (calls) and per call (tokens);
* ``system``: a system prompt of that many tokens, the same for every call of
  the application (whoever sends it), before the call's own input;
* ``shape``: ``sequential`` (each call extends the previous call's prompt and
  output, like an agent's steps), ``parallel`` (all calls sent at once), or
  ``map_reduce`` (all but the last call at once, then the last one after all
  of them, with their outputs as its input, like MapReduce summarization).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from sglang_fair.workloads.context import GenContext, positive
from sglang_fair.workloads.model import Call, Program
from sglang_fair.workloads.spec import ClientSpec, build_params
from sglang_fair.workloads.validate import WorkloadError

SHAPES = ("sequential", "parallel", "map_reduce")


@dataclass
class AppProfile:
    name: str
    weight: float = 1.0
    calls: list[int] = field(default_factory=lambda: [1, 1])
    input: list[int] = field(default_factory=lambda: [256, 256])
    output: list[int] = field(default_factory=lambda: [64, 64])
    system: int = 0
    shape: str = "sequential"

    def check(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("an application needs a non-empty name")
        positive(f"app {self.name!r}: weight", self.weight, integer=False)
        positive(f"app {self.name!r}: system", self.system, allow_zero=True)
        for key in ("calls", "input", "output"):
            pair = getattr(self, key)
            if not (isinstance(pair, list) and len(pair) == 2):
                raise ValueError(f"app {self.name!r}: {key} must be [low, high], got {pair!r}")
            for v in pair:
                positive(f"app {self.name!r}: {key}", v)
            if pair[0] > pair[1]:
                raise ValueError(f"app {self.name!r}: {key} low {pair[0]} > high {pair[1]}")
        if self.shape not in SHAPES:
            raise ValueError(f"app {self.name!r}: shape must be one of {', '.join(SHAPES)}, got {self.shape!r}")
        if self.shape == "map_reduce" and self.calls[0] < 2:
            raise ValueError(f"app {self.name!r}: map_reduce needs at least 2 calls")


@dataclass
class AppsParams:
    apps: list[dict] = field(default_factory=list)

    def check(self) -> None:
        if not isinstance(self.apps, list) or not self.apps:
            raise ValueError("apps must be a non-empty list of application profiles")
        names = [a.get("name") if isinstance(a, dict) else None for a in self.apps]
        if len(set(names)) != len(names):
            raise ValueError(f"application names must be unique, got {names}")

    def profiles(self) -> list[AppProfile]:
        out = []
        for entry in self.apps:
            if not isinstance(entry, dict):
                raise ValueError(f"each application must be a mapping, got {entry!r}")
            try:
                app = AppProfile(**entry)
            except TypeError as e:
                raise ValueError(f"application {entry.get('name')!r}: {e}") from e
            app.check()
            out.append(app)
        return out


def _calls(app: AppProfile, rng: random.Random, system: tuple[int, ...], ctx: GenContext) -> tuple[Call, ...]:
    n = rng.randint(*app.calls)
    own = [ctx.ids(rng, rng.randint(*app.input)) for _ in range(n)]
    outs = [rng.randint(*app.output) for _ in range(n)]
    if app.shape == "sequential":
        # The first call carries the system prompt; the others extend it.
        return tuple(Call(tokens=(system if i == 0 else ()) + own[i], max_new_tokens=outs[i],
                          parents=(i - 1,) if i else (), extends_parent=i > 0) for i in range(n))
    mapped = n - 1 if app.shape == "map_reduce" else n
    calls = [Call(tokens=system + own[i], max_new_tokens=outs[i]) for i in range(mapped)]
    if app.shape == "map_reduce":
        # The reduce step reads the mapped outputs: extend the first, wait for all.
        calls.append(Call(tokens=own[-1], max_new_tokens=outs[-1], parents=tuple(range(mapped)), extends_parent=True))
    return tuple(calls)


def generate(client: ClientSpec, ctx: GenContext) -> list[Program]:
    where = f"apps client {client.name!r}"
    p: AppsParams = build_params(AppsParams, client.params, where)
    try:
        apps = p.profiles()
    except ValueError as e:
        raise WorkloadError(f"{where}: {e}") from e
    # System prompts belong to the application, not the client: same tokens for everyone.
    systems = {a.name: ctx.ids(ctx.rng("apps-system", a.name), a.system) for a in apps}
    rng = ctx.rng("apps", client.name)
    programs = []
    for k, arrival in enumerate(ctx.arrivals(client)):
        app = rng.choices(apps, weights=[a.weight for a in apps])[0]
        programs.append(Program(program_id=f"{client.name}/{app.name}{k}", client=client.name, arrival=arrival,
                                calls=_calls(app, rng, systems[app.name], ctx), well_behaved=client.well_behaved,
                                kind=app.name))
    return programs
