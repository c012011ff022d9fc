"""Every ``SGLANG_FAIR_*`` variable, read and written here only: what the launcher hands the processes SGLang spawns.

SGLang's ``ServerArgs`` keeps only its own fields, and its schedulers and
data-parallel controller are spawned processes (or Ray actors), so the
launcher validates our options once and exports them as JSON in the
environment, which every process inherits:

* ``SGLANG_FAIR_CONFIG``: the workers' policy options (``FairOptions``), read
  by each scheduler when it builds its policy;
* ``SGLANG_FAIR_ROUTER_CONFIG``: the data-parallel router (``RouterSettings``),
  read by the controller that runs it and by ``/server_info``.

And the addresses and switches set at launch for one process kind to find
another (each has a pair of functions below): the report channel
(``SGLANG_FAIR_ROUTER_FEEDBACK``), whether the router holds requests
(``SGLANG_FAIR_ROUTER_LATE_BINDING``), the workers' liveness file
(``SGLANG_FAIR_ROUTER_STATUS``), the client keys file
(``SGLANG_FAIR_CLIENT_KEYS``). Operators may set
``SGLANG_FAIR_ROUTER_HOST``, ``SGLANG_FAIR_ROUTER_KV_PORT``,
``SGLANG_FAIR_METRICS_MAX_CLIENTS`` and
``SGLANG_FAIR_ALLOW_UNSUPPORTED_SGLANG`` (docs/configuration.md), and for
test and benchmark servers ``SGLANG_FAIR_PORT_RANGE`` (docs/benchmarking.md).

Users of the in-process ``sglang.Engine`` may set the variables themselves,
or call the ``export`` functions before starting it. A variable that does not
parse, or names a field these dataclasses lack, is an ``OptionError`` naming
it: a process never runs on settings it half understood.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import math
import os
import tempfile
import uuid
from dataclasses import asdict, dataclass, field, fields

from sglang_fair.core.options import FairOptions, OptionError, json_object
from sglang_fair.core.policies import POLICIES

WORKER_ENV = "SGLANG_FAIR_CONFIG"
ROUTER_ENV = "SGLANG_FAIR_ROUTER_CONFIG"
FEEDBACK_ENV = "SGLANG_FAIR_ROUTER_FEEDBACK"
LATE_BINDING_ENV = "SGLANG_FAIR_ROUTER_LATE_BINDING"  # "1": the router holds requests
STATUS_ENV = "SGLANG_FAIR_ROUTER_STATUS"
CLIENT_KEYS_ENV = "SGLANG_FAIR_CLIENT_KEYS"
HOST_ENV = "SGLANG_FAIR_ROUTER_HOST"
KV_PORT_ENV = "SGLANG_FAIR_ROUTER_KV_PORT"  # first of N consecutive ports; default: random free range
MAX_CLIENTS_ENV = "SGLANG_FAIR_METRICS_MAX_CLIENTS"
ALLOW_UNSUPPORTED_ENV = "SGLANG_FAIR_ALLOW_UNSUPPORTED_SGLANG"
# "LO-HI": the ports test and benchmark servers pick from when none is given, so that people
# sharing one machine keep to their own ranges (sglang_fair.testing.server.pick_free_port).
PORT_RANGE_ENV = "SGLANG_FAIR_PORT_RANGE"
# The folder holding one environment per gateway (sglang_fair.bench.gateway); default .venv-gateways/.
GATEWAYS_ENV = "SGLANG_FAIR_GATEWAYS"
# Seconds an info or admin call waits for every data-parallel rank's answer (http/state_deadline.py).
STATE_DEADLINE_ENV = "SGLANG_FAIR_STATE_DEADLINE_S"
DEFAULT_STATE_DEADLINE_S = 10.0
# "kill": a test server whose stop() is not asked to be graceful is killed at once, not drained
# (sglang_fair.testing.server.LocalServer.stop; the test suite sets it, tests/conftest.py).
TEST_SERVER_STOP_ENV = "SGLANG_FAIR_TEST_SERVER_STOP"
DEFAULT_MAX_CLIENTS = 1000
# SetInternalStateReq.server_args key under which a run-time settings change travels (HTTP -> controller -> schedulers).
ADMIN_SETTINGS_KEY = "fair_settings"
# Stock SGLang policies that we also implement; they keep SGLang's behaviour.
STOCK_POLICIES = ("fcfs", "lpm")


def fair_policy_names() -> list[str]:
    """Policies this package adds to SGLang's ``--schedule-policy``."""
    return [name for name in POLICIES if name not in STOCK_POLICIES]


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


def export_feedback(endpoint: str) -> None:
    """The completion side channel's address, for schedulers spawned from now on."""
    os.environ[FEEDBACK_ENV] = endpoint


def feedback_address() -> str | None:
    return os.environ.get(FEEDBACK_ENV) or None


def export_late_binding(holds_requests: bool) -> None:
    """Tell the schedulers started from this process whether to report admissions and progress."""
    if holds_requests:
        os.environ[LATE_BINDING_ENV] = "1"
    else:
        os.environ.pop(LATE_BINDING_ENV, None)


def late_binding() -> bool:
    return os.environ.get(LATE_BINDING_ENV) == "1"


def export_status_path() -> str:
    """Launcher side: a fresh path for the workers' liveness file (removed at exit)."""
    path = os.environ.get(STATUS_ENV)
    if not path:
        path = os.path.join(tempfile.gettempdir(), f"sglang_fair_router_{os.getpid()}_{uuid.uuid4().hex[:8]}.json")
        os.environ[STATUS_ENV] = path
        atexit.register(_remove, path)
    return path


def status_path() -> str | None:
    return os.environ.get(STATUS_ENV) or None


def export_client_keys(path: str) -> None:
    os.environ[CLIENT_KEYS_ENV] = path


def client_keys_path() -> str | None:
    return os.environ.get(CLIENT_KEYS_ENV) or None


def router_host(default: str) -> str:
    """The address the router's sockets listen on: ``SGLANG_FAIR_ROUTER_HOST``, else ``default``."""
    return os.environ.get(HOST_ENV, "").strip() or default


def fixed_kv_port() -> int | None:
    """``SGLANG_FAIR_ROUTER_KV_PORT``, checked; None when unset."""
    fixed = os.environ.get(KV_PORT_ENV)
    if not fixed:
        return None
    try:
        return int(fixed)
    except ValueError:
        raise ValueError(f"{KV_PORT_ENV} must be a port number, got {fixed!r}") from None


def max_metrics_clients() -> int:
    """``SGLANG_FAIR_METRICS_MAX_CLIENTS``, checked."""
    raw = os.environ.get(MAX_CLIENTS_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_CLIENTS
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"{MAX_CLIENTS_ENV} must be a positive integer, got {raw!r}")
    return value


def port_range() -> tuple[int, int] | None:
    """``SGLANG_FAIR_PORT_RANGE``, checked; None when unset."""
    spec = os.environ.get(PORT_RANGE_ENV, "").strip()
    if not spec:
        return None
    try:
        low, high = (int(part) for part in spec.split("-"))
    except ValueError:
        raise ValueError(f"{PORT_RANGE_ENV} must look like 31000-31099, got {spec!r}") from None
    if not 0 < low <= high < 65536:
        raise ValueError(f"{PORT_RANGE_ENV} must be LO-HI with 0 < LO <= HI < 65536, got {spec!r}")
    return low, high


def state_deadline_s() -> float:
    """``SGLANG_FAIR_STATE_DEADLINE_S``: how long an info or admin call waits for the ranks' answers."""
    raw = os.environ.get(STATE_DEADLINE_ENV)
    if raw is None or raw == "":
        return DEFAULT_STATE_DEADLINE_S
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{STATE_DEADLINE_ENV} must be a positive number of seconds, got {raw!r}")
    return value


def test_servers_killed() -> bool:
    return os.environ.get(TEST_SERVER_STOP_ENV) == "kill"


def unsupported_sglang_allowed() -> bool:
    return os.environ.get(ALLOW_UNSUPPORTED_ENV) == "1"


def worker_environment() -> dict[str, str]:
    """SGLang's and our variables, for workers that do not inherit this process's environment (Ray actors)."""
    return {key: value for key, value in os.environ.items() if key.startswith("SGLANG_")}


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.remove(path)
