#!/usr/bin/env bash
# Install sglang-fair on a GPU machine: SGLang 0.5.23 with its normal
# dependencies (CUDA torch, sglang-kernel, FlashInfer, ...), then the project
# with Ray (for --use-ray).
# Not for CPU-only machines (use scripts/install_cpu.sh), and never together
# with support/cpu_shims, which would shadow the real sgl_kernel/torchvision.
#
#   scripts/install_gpu.sh              # into ./.venv of the repository
#   VENV=/path/to/venv scripts/install_gpu.sh
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$REPO/.venv}"
PYTHON="${PYTHON:-python3}"

if [[ ! -x "$VENV/bin/python" ]]; then
    "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install "sglang==0.5.23"
"$VENV/bin/python" -m pip install -e "$REPO[test,ray]"
