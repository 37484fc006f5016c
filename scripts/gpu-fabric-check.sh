#!/usr/bin/env bash
# GPU-machine check of the built-in GPU peer-to-peer back end
# (docs/fabric.md, "GPU check"): the CUDA driver, NVRTC and NCCL loaded at
# run time by the `p2p_probe` example of ldb-fabric, in one short run.
#
# On one GPU the expected result is `unavailable` ("needs at least 2
# GPUs") with `single_gpu` filled: peer access n/a, the local copy
# bandwidth (of the order of the spec sheet's memory bandwidth / 2: a copy
# reads and writes every byte), the local pointer-chase latency (an NVRTC
# kernel compiled and run), and a 1 MiB allreduce by the one-shot kernel
# and by NCCL (NCCL loaded; both results checked on the GPU's output). On
# two or more GPUs: status `ok` and the full matrices. The probe links only
# glibc and libgcc. Prints everything; writes gpu-fabric-check.log and
# gpu-fabric-check.json to $OUT (or /tmp).
#
# Usage: scripts/gpu-fabric-check.sh [SIZE_MIB]   (copy buffer, default 256)
#
# Needs target/release/examples/p2p_probe (built here with cargo if
# missing: cargo build --release -p ldb-fabric --example p2p_probe).
# NVRTC and NCCL from pip wheels are found by the search below and passed
# as LDB_NVRTC_LIBRARY / LDB_NCCL_LIBRARY.
set -u
cd "$(dirname "$0")/.." || exit 1
size=${1:-256}
bin=target/release/examples/p2p_probe
out=${OUT:-/tmp}
log=$out/gpu-fabric-check.log

# the first file matching $1 under the usual CUDA and Python locations
# (plus the site-packages of the python3 on PATH, where a virtual
# environment's pip wheels such as nvidia-nccl-cu13 live)
find_lib() {
    local site
    site=$(timeout 20 python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null)
    # shellcheck disable=SC2086 # one word per site-packages folder
    find /usr/local/cuda*/lib64 /usr/lib/x86_64-linux-gnu /usr/local/lib/python3*/dist-packages \
        /usr/lib/python3*/dist-packages /opt/conda/lib /root/.local/lib "$HOME/.local/lib" $site \
        -maxdepth 6 -name "$1" 2>/dev/null | head -1
}

main() {
    if [ ! -x "$bin" ]; then
        if command -v cargo >/dev/null 2>&1; then
            cargo build --release -p ldb-fabric --example p2p_probe || return 1
        else
            echo "missing $bin and no cargo here" >&2
            return 1
        fi
    fi
    echo "== host"
    uname -a
    date -u
    echo "== GPUs"
    timeout 10 nvidia-smi -L || echo "(no nvidia-smi)"
    timeout 10 nvidia-smi topo -m || true
    echo "== libraries"
    ldconfig -p 2>/dev/null | grep -E 'libcuda\.so|libnvrtc|libnccl' || echo "(none in ldconfig cache)"
    if [ -z "${LDB_NVRTC_LIBRARY:-}" ] && ! ldconfig -p 2>/dev/null | grep -q 'libnvrtc\.so'; then
        LDB_NVRTC_LIBRARY=$(find_lib 'libnvrtc.so.1[23]')
        export LDB_NVRTC_LIBRARY
    fi
    if [ -z "${LDB_NCCL_LIBRARY:-}" ] && ! ldconfig -p 2>/dev/null | grep -q 'libnccl\.so'; then
        LDB_NCCL_LIBRARY=$(find_lib 'libnccl.so.2')
        export LDB_NCCL_LIBRARY
    fi
    echo "LDB_NVRTC_LIBRARY=${LDB_NVRTC_LIBRARY:-} LDB_NCCL_LIBRARY=${LDB_NCCL_LIBRARY:-}"
    echo "== dynamic section (expect glibc/libgcc only)"
    readelf -d "$bin" | grep NEEDED
    echo "== probe: $size MiB copies, 20 iterations, allreduce sweep 256 B..1 MiB"
    local t0 t1
    t0=${EPOCHREALTIME/./}
    timeout 300 "$bin" "$size" 20 0 full >"$out/gpu-fabric-check.json"
    echo "exit code: $?"
    t1=${EPOCHREALTIME/./}
    echo "wall ms: $(((t1 - t0) / 1000))"
    python3 - "$out/gpu-fabric-check.json" <<'PY'
import json, sys
v = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
print(json.dumps(v, indent=1)[:6000])
print("== verdict")
print("status:", v.get("status"), "| reason:", v.get("reason"), "| error:", v.get("error"))
one = v.get("single_gpu")
if one is not None:
    ar = one.get("allreduce") or {}
    checks = {
        "local copy measured": (one.get("local_copy_gbps") or 0) > 0,
        "NVRTC kernel ran (local latency)": (one.get("local_read_latency_us") or 0) > 0,
        "one-shot allreduce ran and summed right": (ar.get("custom_us") or 0) > 0,
        "NCCL loaded and summed right": (ar.get("nccl_us") or 0) > 0,
    }
    for k, ok in checks.items():
        print(f"{'ok  ' if ok else 'FAIL'} {k}")
    for k, e in (one.get("errors") or {}).items():
        print(f"     {k}: {e}")
else:
    d = v.get("data") or {}
    print("GPUs:", d.get("gpu_count"), "peer access:", d.get("peer_access"))
    print("not measured:", d.get("errors"))
print("machine:", json.dumps(v.get("machine")))
PY
}

main 2>&1 | tee "$log"
