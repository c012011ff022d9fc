"""Carry the fairness options from the launcher to every spawned SGLang process.

SGLang's ``ServerArgs`` only keeps its own fields, and schedulers are spawned
processes, so the launcher validates the options once and exports them as JSON
in ``SGLANG_FAIR_CONFIG``; spawned processes inherit the environment. Users of
the in-process ``sglang.Engine`` may set the variable (or call ``export``).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict

from sglang_fair.core.options import FairOptions, OptionError, json_object

ENV_VAR = "SGLANG_FAIR_CONFIG"


def export(options: FairOptions) -> None:
    """Make ``options`` visible to processes spawned from now on."""
    os.environ[ENV_VAR] = json.dumps(asdict(options))


def load(policy: str) -> FairOptions:
    """The options exported by the launcher, for ``policy`` (the scheduler's)."""
    raw = os.environ.get(ENV_VAR)
    fields: dict = {}
    if raw:
        fields = json_object(raw, ENV_VAR)
        unknown = set(fields) - set(FairOptions.__dataclass_fields__)
        if unknown:
            raise OptionError(f"{ENV_VAR}: unknown option(s) {', '.join(sorted(unknown))}")
    fields["policy"] = policy
    return FairOptions(**fields)
