#!/usr/bin/env bash
# One-shot, idempotent install of sglang-fair for CPU-only machines (tests, CI,
# the demo): CPU torch, SGLang 0.5.23 without its GPU-only dependencies,
# pinned requirements, the CPU stand-ins and the project itself (editable),
# then the SGLang gateways the peer benchmarks run, each in its own environment
# (scripts/install_gateways.sh; GATEWAYS=0 leaves them out).
#
#   scripts/install_cpu.sh              # into ./.venv of the repository
#   VENV=/path/to/venv scripts/install_cpu.sh
#
# torch==2.13.0 must resolve to the CPU build. These machines have it as a
# local wheel (pip's find-links); elsewhere set
#   TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
# The script refuses to finish if a CUDA torch or nvidia-* package got in.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$REPO/.venv}"
PYTHON="${PYTHON:-python3}"
TORCH_PIN="torch==2.13.0"
# Another supported release (binding/common/version.py) for scripts/test_sglang_release.sh; CI uses the default.
SGLANG_VERSION="${SGLANG_VERSION:-0.5.23}"
SGLANG_PIN="sglang==$SGLANG_VERSION"
REQUIREMENTS="$REPO/requirements/cpu.txt"

if [[ ! -x "$VENV/bin/python" ]]; then
    echo "install_cpu: creating venv $VENV"
    "$PYTHON" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)
TORCH_SOURCE=()
if [[ -n "${TORCH_INDEX_URL:-}" ]]; then
    TORCH_SOURCE=(--extra-index-url "$TORCH_INDEX_URL")
fi

echo "install_cpu: $TORCH_PIN (CPU build)"
# -c: torch's own dependencies (sympy, networkx, ...) at the pinned versions.
"${PIP[@]}" install "${TORCH_SOURCE[@]}" -c "$REQUIREMENTS" "$TORCH_PIN"

echo "install_cpu: $SGLANG_PIN without its dependencies"
"${PIP[@]}" install --no-deps "$SGLANG_PIN"

echo "install_cpu: pinned requirements"
# Naming torch here too keeps the resolver on the installed CPU build.
"${PIP[@]}" install "${TORCH_SOURCE[@]}" -r "$REQUIREMENTS" "$TORCH_PIN"

echo "install_cpu: sglang-fair (editable)"
"${PIP[@]}" install --no-deps -e "$REPO"

echo "install_cpu: CPU stand-ins for sgl_kernel and torchvision"
# They once came as a package of their own, which would now shadow sglang-fair's.
"${PIP[@]}" uninstall -y -q sglang-fair-cpu-shims 2>/dev/null || true
"$VENV/bin/python" -m sglang_fair.cpu_standins --install

# Guard rails: a CPU torch, nothing from CUDA, and a consistent environment
# apart from the requirements sglang declares but the CPU path does not use.
"$VENV/bin/python" - <<'PY'
import sys
import torch
if torch.version.cuda is not None:
    sys.exit(f"install_cpu: torch {torch.__version__} is a CUDA build; set TORCH_INDEX_URL to a CPU wheel index")
PY
if "${PIP[@]}" list --format=freeze | grep -i -E '^nvidia-'; then
    echo "install_cpu: nvidia packages were installed (see above); the CPU path must not pull them" >&2
    exit 1
fi
if problems="$("${PIP[@]}" check 2>&1 | grep -v -E "^sglang ${SGLANG_VERSION//./\\.} (requires|has requirement) ")"; then
    if [[ -n "$problems" && "$problems" != "No broken requirements found." ]]; then
        echo "install_cpu: inconsistent environment:" >&2
        echo "$problems" >&2
        exit 1
    fi
fi
"$VENV/bin/python" -c "import sglang, sglang_fair, sgl_kernel, torchvision; print('install_cpu: ok,', sglang.__version__)"

if [[ "${GATEWAYS:-1}" != 0 ]]; then
    PYTHON="$PYTHON" "$REPO/scripts/install_gateways.sh"
fi
