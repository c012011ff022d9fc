"""What the launcher hands every process SGLang spawns: typed settings, exported once.

SGLang's ``ServerArgs`` keeps only its own fields, and its schedulers and
data-parallel controller are spawned processes (or Ray actors), so the
launcher validates our options once and exports them as JSON in the
environment, which every process inherits:

* ``SGLANG_FAIR_CONFIG``: the workers' policy options (``FairOptions``), read
  by each scheduler when it builds its policy;
* ``SGLANG_FAIR_ROUTER_CONFIG``: the data-parallel router (``RouterSettings``),
  read by the controller that runs it and by ``/server_info``.

Users of the in-process ``sglang.Engine`` may set the variables themselves,
or call the ``export`` functions before starting it. A variable that does not
parse, or names a field these dataclasses lack, is an ``OptionError`` naming
it: a process never runs on settings it half understood.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields

from sglang_fair.core.options import FairOptions, OptionError, json_object

WORKER_ENV = "SGLANG_FAIR_CONFIG"
ROUTER_ENV = "SGLANG_FAIR_ROUTER_CONFIG"


def export_worker(options: FairOptions) -> None:
    """Make the policy ``options`` visible to processes spawned from now on."""
    os.environ[WORKER_ENV] = json.dumps(asdict(options))


def load_worker(policy: str) -> FairOptions:
    """The options exported by the launcher, for ``policy`` (the scheduler's)."""
    values = _read(WORKER_ENV, FairOptions)
    values["policy"] = policy
    return FairOptions(**values)


@dataclass
class RouterSettings:
    """The data-parallel router as the launcher configured it."""

    method: str  # a name of sglang_fair.router.ROUTERS
    options: dict = field(default_factory=dict)  # make_router's keyword options, checked at launch
    kv_port: int | None = None  # first of the ports the workers' KV event publishers connect to (one per rank)
    feedback: str | None = None  # the completion side channel, when fixed before the workers exist (Ray)

    def export(self) -> None:
        os.environ[ROUTER_ENV] = json.dumps({k: v for k, v in asdict(self).items() if v is not None})

    @classmethod
    def load(cls, method: str) -> RouterSettings:
        """The exported settings for ``method``; its defaults if none (or another method's) were exported."""
        exported = exported_router()
        return exported if exported is not None and exported.method == method else cls(method)


def exported_router() -> RouterSettings | None:
    """The router settings in this process's environment, None if there are none."""
    if not os.environ.get(ROUTER_ENV):
        return None
    values = _read(ROUTER_ENV, RouterSettings)
    if not isinstance(values.get("method"), str) or not isinstance(values.get("options", {}), dict):
        raise OptionError(f"{ROUTER_ENV}: needs a router name in 'method' and an object in 'options'")
    return RouterSettings(**values)


def configured() -> bool:
    """Whether the launcher exported any sglang-fair settings to this process."""
    return bool(os.environ.get(WORKER_ENV) or os.environ.get(ROUTER_ENV))


def _read(env: str, cls: type) -> dict:
    raw = os.environ.get(env)
    if not raw:
        return {}
    values = json_object(raw, env)
    unknown = set(values) - {f.name for f in fields(cls)}
    if unknown:
        raise OptionError(f"{env}: unknown setting(s) {', '.join(sorted(unknown))}")
    return values
