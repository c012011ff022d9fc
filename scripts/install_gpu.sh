#!/usr/bin/env bash
# Install sglang-fair on a GPU machine: SGLang (0.5.23 unless SGLANG_VERSION says) with its normal
# dependencies (CUDA torch, sglang-kernel, FlashInfer, ...), then the project
# with Ray (for --use-ray), then a smoke test of the result.
# Not for CPU-only machines (use scripts/install_cpu.sh). sglang-fair's CPU stand-ins for
# sgl_kernel/torchvision stay off here: the launcher uses them only where those are missing.
#
#   scripts/install_gpu.sh              # into ./.venv of the repository
#   VENV=/path/to/venv scripts/install_gpu.sh
#   VENV=/path/to/existing/sglang/venv SGLANG_VERSION=0.5.22 scripts/install_gpu.sh   # beside an SGLang 0.5.22 already there
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$REPO/.venv}"
PYTHON="${PYTHON:-python3}"
# Another supported release (sglang_fair/binding/common/version.py), e.g. beside an SGLang already there.
SGLANG_VERSION="${SGLANG_VERSION:-0.5.23}"
SGLANG_PIN="sglang==$SGLANG_VERSION"

fail() { echo "install_gpu: $*" >&2; exit 1; }

if [[ ! -x "$VENV/bin/python" ]]; then
    # SGLang needs Python >= 3.11; say so before pip fails on it.
    "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
        || fail "$PYTHON is $("$PYTHON" -V 2>&1); SGLang needs Python >= 3.11 (set PYTHON=python3.11)"
    echo "install_gpu: creating venv $VENV"
    "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
    || fail "$VENV runs $("$VENV/bin/python" -V 2>&1); SGLang needs Python >= 3.11"
# The stand-ins' .pth (python -m sglang_fair.cpu_standins --install), or their old package of their own.
if "$VENV/bin/python" -c 'import pathlib, sys, sysconfig
sys.exit(not (pathlib.Path(sysconfig.get_paths()["purelib"]) / "sglang_fair_cpu_standins.pth").exists())' \
    || "$VENV/bin/python" -m pip show sglang-fair-cpu-shims >/dev/null 2>&1; then
    fail "$VENV has the CPU stand-ins of scripts/install_cpu.sh; use a fresh VENV for the GPU install"
fi
command -v nvidia-smi >/dev/null || echo "install_gpu: warning: no nvidia-smi on PATH; is this a GPU machine?" >&2

"$VENV/bin/python" -m pip install "$SGLANG_PIN"
"$VENV/bin/python" -m pip install -e "$REPO[test,ray]"

echo "install_gpu: checks"
# CUDA torch that sees a GPU, a driver new enough for its CUDA build, sgl_kernel and FlashInfer
# importing, a supported SGLang: each failure is named (sglang_fair/install_check.py).
"$VENV/bin/python" -m sglang_fair.install_check || fail "the GPU install does not work (see above)"
"$VENV/bin/python" -m sglang_fair.launch_server --help | grep -q -- "--fair-quantum" \
    || fail "launch_server --help does not list the fair options: the plugin did not load"
echo "install_gpu: ok"
