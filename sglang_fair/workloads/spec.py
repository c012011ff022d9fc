"""Scenario configs: the YAML files under configs/ and their validation.

A scenario file looks like::

    workload: tot            # generator name (see workloads/registry.py)
    name: tot-s2             # run label
    seed: 0
    vocab_size: 1024
    defaults: {num_programs: 4, rate: 0.5, arrival: gamma, cv: 2.0, branches: 2}
    clients:
      - {name: bad, well_behaved: false, question_scale: 10}
      - {name: good, count: 3}   # three clients good-0, good-1, good-2

Each client's parameters are ``defaults`` overridden by its own entry.
Parameters common to all generators are in ClientSpec; the rest are the
generator's own (its params dataclass), and unknown keys are an error so a
typo never silently falls back to a default. Overrides (``--set``) replace a
key of every client, except ``vocab_size``, which replaces the scenario's.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from sglang_fair.core.clients import normalize_client_id
from sglang_fair.workloads.arrivals import check_process
from sglang_fair.workloads.tokens import DEFAULT_VOCAB_SIZE
from sglang_fair.workloads.validate import WorkloadError

CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"  # package data; configs/ in the repo links here


@dataclass(frozen=True)
class ClientSpec:
    name: str
    well_behaved: bool = True
    num_programs: int = 4
    rate: float = 1.0  # programs per second
    arrival: str = "poisson"
    cv: float = 1.0
    params: dict = field(default_factory=dict)  # generator-specific, checked by the generator


@dataclass
class Scenario:
    workload: str
    name: str
    seed: int
    vocab_size: int
    clients: list[ClientSpec]
    source: str = ""  # file it came from


_COMMON = {f.name for f in dataclasses.fields(ClientSpec)} - {"params", "name"}
_TOP = {"workload", "name", "seed", "vocab_size", "defaults", "clients", "description"}


def scenario_path(workload: str, scenario: str) -> Path:
    """``--scenario`` is a file path or a name resolved as configs/<workload>_<scenario>.yaml."""
    as_path = Path(scenario)
    if as_path.suffix in (".yaml", ".yml"):
        if not as_path.is_file():
            raise WorkloadError(f"scenario file {scenario} does not exist")
        return as_path
    path = CONFIG_DIR / f"{workload}_{scenario}.yaml"
    if not path.is_file():
        known = sorted(p.stem.split("_", 1)[1] for p in CONFIG_DIR.glob(f"{workload}_*.yaml"))
        raise WorkloadError(
            f"unknown scenario {scenario!r} for workload {workload!r}"
            + (f": known scenarios are {', '.join(known)}" if known else f": no configs/{workload}_*.yaml exist")
        )
    return path


def load_scenario(path: Path, overrides: dict[str, Any] | None = None, seed: int | None = None) -> Scenario:
    """Read and check a scenario file; ``overrides`` replace keys of every client
    (``vocab_size``: the scenario's vocabulary)."""
    try:
        raw = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as e:
        raise WorkloadError(f"cannot read scenario {path}: {e}") from e
    if not isinstance(raw, dict):
        raise WorkloadError(f"scenario {path}: top level must be a mapping")
    return parse_scenario(raw, str(path), overrides, seed)


def parse_scenario(raw: dict, source: str = "<dict>", overrides: dict | None = None, seed: int | None = None) -> Scenario:
    unknown = set(raw) - _TOP
    if unknown:
        raise WorkloadError(f"scenario {source}: unknown keys {sorted(unknown)}")
    if "workload" not in raw:
        raise WorkloadError(f"scenario {source}: missing 'workload'")
    defaults = dict(raw.get("defaults") or {})
    entries = raw.get("clients")
    if not isinstance(entries, list) or not entries:
        raise WorkloadError(f"scenario {source}: 'clients' must be a non-empty list")
    overrides = dict(overrides or {})
    if "vocab_size" in overrides:
        vocab, where = overrides.pop("vocab_size"), "the vocab_size override"
    else:
        vocab, where = raw.get("vocab_size", DEFAULT_VOCAB_SIZE), f"scenario {source}: vocab_size"
    if not isinstance(vocab, int) or isinstance(vocab, bool) or vocab < 2:
        raise WorkloadError(f"{where} must be an integer >= 2, got {vocab!r}")
    clients: list[ClientSpec] = []
    for k, entry in enumerate(entries):
        if not isinstance(entry, dict) or "name" not in entry:
            raise WorkloadError(f"scenario {source}: client {k} must be a mapping with a 'name'")
        merged = {**defaults, **entry, **overrides}
        count = merged.pop("count", 1)
        if not isinstance(count, int) or count < 1:
            raise WorkloadError(f"scenario {source}: client {entry['name']!r}: count must be an integer >= 1")
        names = [str(entry["name"])] if count == 1 else [f"{entry['name']}-{j}" for j in range(count)]
        for name in names:
            clients.append(_client(name, merged, source))
    ids = [c.name for c in clients]
    if len(set(ids)) != len(ids):
        raise WorkloadError(f"scenario {source}: duplicate client names {sorted({i for i in ids if ids.count(i) > 1})}")
    return Scenario(
        workload=str(raw["workload"]),
        name=str(raw.get("name", Path(source).stem)),
        seed=int(raw.get("seed", 0) if seed is None else seed),
        vocab_size=vocab,
        clients=clients,
        source=source,
    )


def _client(name: str, merged: dict, source: str) -> ClientSpec:
    where = f"scenario {source}: client {name!r}"
    if normalize_client_id(name) != name:
        raise WorkloadError(f"{where}: client names must be 1-64 characters of [A-Za-z0-9._@-]")
    common = {k: merged[k] for k in _COMMON if k in merged}
    params = {k: v for k, v in merged.items() if k not in _COMMON and k != "name"}
    try:
        spec = ClientSpec(name=name, params=params, **common)
        n = spec.num_programs
        if not isinstance(n, int) or n < 0:
            raise ValueError(f"num_programs must be an integer >= 0, got {n!r}")
        if not (isinstance(spec.rate, (int, float)) and spec.rate > 0 and math.isfinite(spec.rate)):
            raise ValueError(f"rate must be a positive number (programs per second), got {spec.rate!r}")
        check_process(spec.arrival, spec.cv)
    except (TypeError, ValueError) as e:
        raise WorkloadError(f"{where}: {e}") from e
    return spec


def build_params(cls: type, params: dict, where: str):
    """Instantiate a generator's params dataclass, rejecting unknown keys."""
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(params) - names
    if unknown:
        raise WorkloadError(f"{where}: unknown parameters {sorted(unknown)} (known: {sorted(names)})")
    try:
        obj = cls(**params)
        check = getattr(obj, "check", None)
        if check is not None:
            check()
    except (TypeError, ValueError) as e:
        raise WorkloadError(f"{where}: {e}") from e
    return obj
