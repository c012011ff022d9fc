"""CPU cores for each rank of a multi-rank CPU server (``--dp N``, ``--tp N``).

SGLang reads one group of cores per rank from ``SGLANG_CPU_OMP_THREADS_BIND``
("0|1", "0-15|16-31") and refuses to start more ranks than NUMA nodes without
it. It then binds a rank's threads to its group only on CPUs with AMX or on
arm64 (``sglang.srt.distributed.bootstrap._init_cpu_threads_env`` merely warns
elsewhere), so on other CPUs every rank runs as many intra-op threads as the
machine has cores, on any core: two ranks on two cores run four spinning
OpenMP threads and decode about 3x slower than a rank bound to its core
(docs/results/2026-11-27-dp-scaling-cpu.md).

Two pieces, one per process:

* the launcher (``sglang_fair.launch_server``) fills the variable in from the
  process's CPU affinity when it is unset (``default_bind``), so ``--dp 2``
  starts on CPU with nothing set;
* every scheduler process then holds its rank to its group
  (``pin_rank_threads``, AROUND ``_init_cpu_threads_env``): all its threads on
  the group's cores, one intra-op thread per core.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence

from sglang_fair.binding.common import sglang_private

logger = logging.getLogger(__name__)

BIND_ENV = "SGLANG_CPU_OMP_THREADS_BIND"


class TooFewCores(ValueError):
    """More ranks than cores: ranks would share cores and spin against each other."""


def parse_cpu_list(spec: str) -> list[int]:
    """Cores named by a Linux cpu list ("0-3,6"), in order."""
    cpus: list[int] = []
    for part in spec.strip().split(","):
        low, sep, high = part.strip().partition("-")
        try:
            first, last = int(low), int(high) if sep else int(low)
        except ValueError:
            raise ValueError(f"{BIND_ENV}: {spec!r} is not a list of cores like 0-3,6") from None
        if first < 0 or last < first:
            raise ValueError(f"{BIND_ENV}: {spec!r} is not a list of cores like 0-3,6")
        cpus.extend(range(first, last + 1))
    return cpus


def format_cpu_list(cpus: Sequence[int]) -> str:
    """The shortest cpu list for ``cpus``: a range when contiguous, as SGLang documents them."""
    cpus = sorted(cpus)
    if len(cpus) > 1 and cpus[-1] - cpus[0] == len(cpus) - 1:
        return f"{cpus[0]}-{cpus[-1]}"
    return ",".join(map(str, cpus))


def bind_groups(ranks: int, cpus: Sequence[int]) -> str:
    """A ``SGLANG_CPU_OMP_THREADS_BIND`` value giving each of ``ranks`` an equal slice of ``cpus``.

    Raises TooFewCores when there are fewer cores than ranks.
    """
    cpus = sorted(cpus)
    if len(cpus) < ranks:
        raise TooFewCores(
            f"{ranks} ranks (dp x tp x pp) need at least {ranks} CPU cores, and this process may use "
            f"{len(cpus)} ({format_cpu_list(cpus)}); lower --dp/--tp, or set {BIND_ENV} yourself "
            f"(one '|'-separated group per rank, e.g. {'|'.join(['0'] * ranks)}) to share cores knowingly")
    per_rank = len(cpus) // ranks
    return "|".join(format_cpu_list(cpus[r * per_rank:(r + 1) * per_rank]) for r in range(ranks))


def default_bind(ranks: int, environ: dict[str, str] | os._Environ = os.environ) -> str | None:
    """The binding to set for a CPU server of ``ranks`` ranks: None when one rank, or when given."""
    if ranks <= 1 or environ.get(BIND_ENV):
        return None
    return bind_groups(ranks, sorted(os.sched_getaffinity(0)))


def pin_rank_threads(original: Callable, *, local_omp_cpuid: str | None, **kwargs) -> None:
    """AROUND ``sglang.srt.distributed.bootstrap._init_cpu_threads_env`` (SGLang 0.5.21-0.5.23,
    called once per rank with the rank's group): where SGLang binds no threads itself (no AMX,
    not arm64) and a binding was given, hold this rank to its cores."""
    original(local_omp_cpuid=local_omp_cpuid, **kwargs)
    sglang_binds = sglang_private.sglang_binds_cpu_threads()
    if os.environ.get(BIND_ENV) and local_omp_cpuid and not sglang_binds:
        pin_process(parse_cpu_list(str(local_omp_cpuid)))


def pin_process(cpus: list[int]) -> None:
    """Every thread of this process on ``cpus``, and one intra-op thread per core."""
    import torch

    allowed = os.sched_getaffinity(0)
    if not set(cpus) <= allowed:
        raise ValueError(f"{BIND_ENV}: this rank's cores {format_cpu_list(cpus)} are not all among the cores "
                         f"this process may use ({format_cpu_list(sorted(allowed))})")
    # sched_setaffinity(0) moves only the calling thread; threads already started keep theirs.
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except ProcessLookupError:  # a thread that ended meanwhile
            pass
    torch.set_num_threads(len(cpus))
    logger.info("sglang-fair: this rank runs on cores %s with %d intra-op threads", format_cpu_list(cpus), len(cpus))
