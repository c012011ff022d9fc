#!/usr/bin/env bash
# The engine and server tests against another SGLang release, in a venv of its own
# (CI tests the pinned release in .venv). A release not yet in
# sglang_fair/binding/common/version.py's SUPPORTED_SGLANG runs with the override set.
#
#   scripts/test_sglang_release.sh 0.5.22                 # .venv-sglang-0.5.22, then pytest -m "engine or server"
#   scripts/test_sglang_release.sh 0.5.22 -x tests/binding  # extra pytest arguments replace the default selection
set -euo pipefail

VERSION="${1:?usage: scripts/test_sglang_release.sh VERSION [pytest arguments]}"
shift
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$REPO/.venv-sglang-$VERSION}"

VENV="$VENV" SGLANG_VERSION="$VERSION" "$REPO/scripts/install_cpu.sh"
cd "$REPO"
echo "test_sglang_release: SGLang $VERSION, $(date -u +%Y-%m-%dT%H:%MZ)"
if [[ $# -eq 0 ]]; then
    set -- -m "engine or server"
fi
SGLANG_FAIR_ALLOW_UNSUPPORTED_SGLANG=1 exec "$VENV/bin/python" -m pytest -q -p no:cacheprovider "$@"
