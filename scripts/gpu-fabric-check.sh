#!/usr/bin/env bash
# GPU-machine check of the fabric diagnostics' GPU path (docs/fabric.md):
# the CUDA driver loaded at run time by the built-in P2P back end, the GPU
# count, and the status on a one-GPU machine (expected: `unavailable`,
# "needs at least 2 GPUs"); the binary still links only glibc and libgcc;
# the CPU fabric on the same host with small sizes. Prints everything and
# writes the fabric-only file and a log to $OUT (or /tmp).
#
# Usage: scripts/gpu-fabric-check.sh
#
# Needs target/release/llm-decode-bench (built here with cargo if missing).
# Has not run on real GPU hardware yet.
set -u
cd "$(dirname "$0")/.." || exit 1
bin=target/release/llm-decode-bench
out=${OUT:-/tmp}
log=$out/gpu-fabric-check.log

main() {
    if [ ! -x "$bin" ]; then
        if command -v cargo >/dev/null 2>&1; then
            cargo build --release -p llm-decode-bench || return 1
        else
            echo "missing $bin and no cargo here" >&2
            return 1
        fi
    fi
    echo "== host"
    uname -a
    date -u
    echo "== driver"
    ldconfig -p 2>/dev/null | grep -E 'libcuda\.so|libnvrtc|libnccl' || echo "(none in ldconfig cache)"
    timeout 10 nvidia-smi -L || echo "(no nvidia-smi)"
    timeout 10 nvidia-smi topo -m || true
    echo "== dynamic section (expect glibc/libgcc only)"
    readelf -d "$bin" | grep NEEDED
    echo "== fabric-only run"
    "$bin" --p2pmark-only --amd-fabric \
        --amd-fabric-size-mb 256 --amd-fabric-latency-mb 256 --amd-fabric-latency-iters 2000000 \
        --output "$out/gpu-fabric-check.json"
    echo "exit code: $?"
    echo "== p2pmark block"
    python3 - "$out/gpu-fabric-check.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
p = d["p2pmark"]
print("status:", p.get("status"), "| reason:", p.get("reason"))
print("amd_fabric:", d["amd_fabric"].get("status"),
      "local read GB/s:", (d["amd_fabric"].get("data") or {}).get("read_gbps"))
ok_one_gpu = p.get("status") == "unavailable" and "at least 2 GPUs" in (p.get("reason") or "")
print("one-GPU expectation met:", ok_one_gpu)
PY
}

main 2>&1 | tee "$log"
