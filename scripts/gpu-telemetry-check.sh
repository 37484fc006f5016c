#!/usr/bin/env bash
# GPU-machine check of the telemetry path: NVML for real, the nvidia-smi
# fallback, the sampler with a summary (energy, clocks, throttle), and the
# startup diagnostics. Prints everything; writes a copy to $OUT if set.
#
# Usage: scripts/gpu-telemetry-check.sh [seconds]   (default 8)
#
# Needs only the release example binary. Build it where cargo exists:
#   cargo build --release -p ldb-telemetry --example probe
# and carry target/release/examples/probe to the GPU machine. If the binary
# is missing and cargo is present, the script builds it.
set -u
secs=${1:-8}
cd "$(dirname "$0")/.." || exit 1
bin=target/release/examples/probe
log=${OUT:-/tmp}/gpu-telemetry-check.log

main() {
    if [ ! -x "$bin" ]; then
        if command -v cargo >/dev/null 2>&1; then
            cargo build --release -p ldb-telemetry --example probe || return 1
        else
            echo "missing $bin and no cargo here" >&2
            return 1
        fi
    fi
    echo "== host"
    uname -a
    date -u
    echo "== libnvidia-ml"
    ldconfig -p 2>/dev/null | grep -i libnvidia-ml || echo "(not in ldconfig cache)"
    echo "== nvidia-smi (reference values)"
    timeout 10 nvidia-smi -L
    timeout 10 nvidia-smi --query-gpu=index,name,temperature.gpu,utilization.gpu,utilization.memory,memory.used,memory.total,power.draw,power.limit,clocks.sm,clocks.mem,pcie.link.gen.current,pcie.link.width.current,clocks_throttle_reasons.active --format=csv
    timeout 10 nvidia-smi dmon -s t -c 1

    # Optional load so the summary shows power, clocks and throttle under
    # work rather than at idle.
    load_pid=""
    if timeout 60 python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
        echo "== starting a ${secs}s bf16 matmul load (torch)"
        python3 - "$secs" <<'PY' &
import sys, time, torch
end = time.time() + float(sys.argv[1]) + 2
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
n = 0
while time.time() < end:
    for _ in range(20):
        c = a @ b
    torch.cuda.synchronize()
    n += 20
print(f"load: {n} matmuls", flush=True)
PY
        load_pid=$!
        sleep 3
    else
        echo "== no torch with CUDA: probing at idle"
    fi

    echo "== probe"
    timeout $((secs + 90)) "$bin" "$secs"
    echo "probe exit: $?"
    if [ -n "$load_pid" ]; then wait "$load_pid"; fi
}

main 2>&1 | tee "$log"
