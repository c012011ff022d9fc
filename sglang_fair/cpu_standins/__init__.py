"""Import-only stand-ins for ``sgl_kernel`` and ``torchvision``, so SGLang serves on a machine without a GPU.

SGLang 0.5.23's CPU engine (``SGLANG_USE_CPU_ENGINE=1``) still imports both
at module level, and neither real wheel loads next to a CPU build of torch
(``torchvision`` unconstrained also pulls a CUDA torch). ``site/`` holds
stand-ins:

* ``sgl_kernel``: ``assign_req_to_token_pool_cpu``, the one function called
  while serving a Llama model with the ``torch_native`` attention backend, in
  plain torch; the other names SGLang imports raise ``NotImplementedError``
  naming themselves; unknown names fail to import, so SGLang's ``ImportError``
  fallbacks keep working. It registers no ``torch.ops.sgl_kernel`` operators:
  SGLang probes them to switch onto its Intel AMX kernels.
* ``torchvision``: SGLang imports it only for multimodal models; every name is
  a placeholder that raises ``NotImplementedError`` when used.

``site/`` is no package of ours: it is put on the import path, never imported
through ``sglang_fair``. Two ways in:

* ``python -m sglang_fair.cpu_standins --install`` adds it to the running
  environment's path for good (a ``.pth`` file; ``scripts/install_cpu.sh``
  does this). It refuses where a real ``sgl_kernel``/``torchvision`` or a CUDA
  torch is installed: there the stand-ins would shadow the real packages.
* ``python -m sglang_fair.launch_server --tiny-cpu`` (or ``--device cpu``)
  puts it on the path of the server and its processes when a module is
  missing (``activate_if_missing``), so an installed wheel serves on CPU.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import sysconfig
from pathlib import Path

SITE = Path(__file__).resolve().parent / "site"
MODULES = ("sgl_kernel", "torchvision")
PTH_NAME = "sglang_fair_cpu_standins.pth"


class RealPackagesPresent(RuntimeError):
    """The stand-ins would shadow an installed real package or a CUDA torch."""


def missing() -> list[str]:
    """The modules SGLang's CPU engine imports that this environment cannot find."""
    return [name for name in MODULES if importlib.util.find_spec(name) is None]


def activate_if_missing() -> list[str]:
    """Put ``site/`` first on this process's import path and on ``PYTHONPATH`` (for the
    server's child processes) when a module is missing; returns what was missing."""
    absent = missing()
    if absent and str(SITE) not in sys.path:
        sys.path.insert(0, str(SITE))
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(SITE), os.environ.get("PYTHONPATH", "")) if p)
    return absent


def install(site_packages: str | os.PathLike | None = None) -> Path:
    """Write the ``.pth`` file that puts ``site/`` on every import path of this environment."""
    _refuse_real_packages()
    target = Path(site_packages or sysconfig.get_paths()["purelib"]) / PTH_NAME
    target.write_text(f"{SITE}\n")
    return target


def _refuse_real_packages() -> None:
    for name in MODULES:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin and not Path(spec.origin).resolve().is_relative_to(SITE):
            raise RealPackagesPresent(f"a real {name} is installed at {spec.origin}; the CPU stand-ins would "
                                      f"shadow it (they are for machines without a GPU)")
    if importlib.util.find_spec("torch") is not None:
        import torch

        if torch.version.cuda is not None:
            raise RealPackagesPresent(f"torch {torch.__version__} is a CUDA build; the CPU stand-ins are for "
                                      f"CPU-only environments")
