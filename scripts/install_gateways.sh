#!/usr/bin/env bash
# The SGLang gateways the benchmarks and tests run beside sglang-fair, each in an environment of
# its own (both install a console script named `smg`): smg 1.13.0, the SGLang model gateway, and
# sglang-router 0.3.2, its January release. Idempotent; about 20 s and 300 MB the first time.
#
#   scripts/install_gateways.sh                       # into ./.venv-gateways/{smg,sglang-router}
#   SGLANG_FAIR_GATEWAYS=/path scripts/install_gateways.sh
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROOT="${SGLANG_FAIR_GATEWAYS:-$REPO/.venv-gateways}"
PYTHON="${PYTHON:-python3}"

install() {  # name, requirement, command that must answer
    local name=$1 requirement=$2 env="$ROOT/$1"
    shift 2
    if [[ ! -x "$env/bin/python" ]]; then
        "$PYTHON" -m venv "$env"
    fi
    if ! "$env/bin/python" -m pip --disable-pip-version-check show -q "${requirement%%==*}" >/dev/null 2>&1 \
        || [[ "$("$env/bin/python" -m pip --disable-pip-version-check show "${requirement%%==*}" | sed -n 's/^Version: //p')" \
              != "${requirement##*==}" ]]; then
        echo "install_gateways: $requirement into $env"
        "$env/bin/python" -m pip --disable-pip-version-check install -q "$requirement"
    fi
    "$@" >/dev/null 2>&1 || { echo "install_gateways: $name does not run: $*" >&2; exit 1; }
}

install smg smg==1.13.0 "$ROOT/smg/bin/smg" launch --help
install sglang-router sglang-router==0.3.2 "$ROOT/sglang-router/bin/python" -c "import sglang_router"
echo "install_gateways: ok, $ROOT/smg (smg 1.13.0) and $ROOT/sglang-router (sglang-router 0.3.2)"
