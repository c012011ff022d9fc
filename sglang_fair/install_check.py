"""Is this environment a working GPU install of SGLang for sglang-fair? (``scripts/install_gpu.sh``'s last step)

    python -m sglang_fair.install_check            # exit 0 and one line per check when all hold

Each check names what is wrong and what to do: torch must be a CUDA build
that sees a GPU, the NVIDIA driver must support the CUDA release torch was
built for, SGLang's kernels (``sgl_kernel``) and FlashInfer must import, and
the installed SGLang must be one the binding supports.
"""

from __future__ import annotations

import argparse
import importlib
import re
import shutil
import subprocess
import sys


def _release(text: str | None) -> tuple[int, ...] | None:
    """``"12.8"`` -> (12, 8); None for anything else."""
    match = re.fullmatch(r"\s*(\d+)\.(\d+)(?:\.\d+)?\s*", text or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def driver_cuda_release(nvidia_smi_output: str) -> str | None:
    """The newest CUDA release the driver supports, as ``nvidia-smi`` prints it (``CUDA Version: 12.4``)."""
    match = re.search(r"CUDA Version:\s*(\d+\.\d+)", nvidia_smi_output)
    return match.group(1) if match else None


def driver_problem(torch_cuda: str | None, driver_cuda: str | None) -> str | None:
    """Why a driver supporting CUDA ``driver_cuda`` cannot run torch built for ``torch_cuda``, or None."""
    built, supported = _release(torch_cuda), _release(driver_cuda)
    if built is None or supported is None:
        return None  # nothing to compare; the CUDA check says whether a GPU is usable at all
    if supported < built:
        return (f"the NVIDIA driver supports CUDA up to {driver_cuda}, but torch was built for CUDA {torch_cuda}: "
                f"upgrade the driver, or install a torch built for CUDA {driver_cuda} or older")
    return None


def problems() -> tuple[list[str], list[str]]:
    """(what holds, what does not), one line each."""
    good: list[str] = []
    bad: list[str] = []
    try:
        import torch
    except ImportError as exc:
        return good, [f"torch does not import ({exc}); run scripts/install_gpu.sh in a fresh VENV"]
    if torch.version.cuda is None:
        bad.append(f"torch {torch.__version__} is a CPU build; install SGLang's CUDA torch (scripts/install_gpu.sh "
                   "in a fresh VENV, not one made by scripts/install_cpu.sh)")
    elif not torch.cuda.is_available():
        bad.append(f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no GPU: check the NVIDIA driver "
                   "(nvidia-smi) and CUDA_VISIBLE_DEVICES")
    else:
        good.append(f"torch {torch.__version__}, CUDA {torch.version.cuda}, "
                    f"{torch.cuda.device_count()} GPU(s): {torch.cuda.get_device_name(0)}")
    smi = shutil.which("nvidia-smi")
    if smi is None:
        bad.append("no nvidia-smi on PATH: no NVIDIA driver is installed, or it is not on PATH")
    else:
        try:
            output = subprocess.run([smi], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.SubprocessError) as exc:
            output = ""
            bad.append(f"nvidia-smi failed ({exc})")
        problem = driver_problem(torch.version.cuda, driver_cuda_release(output))
        if problem:
            bad.append(problem)
        elif output:
            good.append(f"NVIDIA driver supports CUDA {driver_cuda_release(output) or '(unknown)'}")
    for module, package in (("sgl_kernel", "sglang-kernel"), ("flashinfer", "flashinfer-python")):
        try:
            imported = importlib.import_module(module)
        except Exception as exc:  # an import error, or a kernel library that does not load
            bad.append(f"{module} does not import ({type(exc).__name__}: {exc}); reinstall {package} for this "
                       f"torch and CUDA")
            continue
        if _is_standin(imported):
            bad.append(f"{module} is sglang-fair's CPU stand-in; use a fresh VENV for the GPU install")
        else:
            good.append(f"{module} {getattr(imported, '__version__', '')}".rstrip())
    try:
        from sglang_fair.binding.common.version import check_sglang

        good.append(f"sglang {check_sglang()}")
    except Exception as exc:  # not installed, or a release the binding refuses (its message names it)
        bad.append(str(exc))
    return good, bad


def _is_standin(module: object) -> bool:
    from pathlib import Path

    from sglang_fair.cpu_standins import SITE

    where = getattr(module, "__file__", None)
    return where is not None and Path(SITE).resolve() in Path(where).resolve().parents


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args(argv)
    good, bad = problems()
    for line in good:
        print(f"ok: {line}")
    for line in bad:
        print(f"FAIL: {line}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
