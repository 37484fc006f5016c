#!/usr/bin/env bash
# The native CPU fabric against Debian's mbw (docs/fabric.md, "Bench
# against mbw"): local copy bandwidth with one thread on the same buffer
# size, side by side in one run, then pointer-chase latency of a working
# set far above the last-level cache against one that fits in L2.
#
# Usage: bench/fabric-vs-mbw.sh [SIZE_MIB] [ITERS]   (default 256, 10)
# Needs mbw (apt-get install mbw) and cargo.
set -eu
size=${1:-256}
iters=${2:-10}
cd "$(dirname "$0")/.."
command -v mbw >/dev/null || { echo "mbw not installed (apt-get install mbw)" >&2; exit 1; }
cargo build --release -q -p ldb-fabric --example fabric_bench
echo "== host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs, $(uname -r)"
# mbw -t0: memcpy of SIZE MiB between two arrays, ITERS times; its MiB/s
# counts the bytes copied, as ours does. Pinned to CPU 0 like ours.
mbw_line=$(taskset -c 0 mbw -q -n "$iters" -t0 "$size" | grep '^AVG')
mibs=$(echo "$mbw_line" | sed -E 's/.*Copy: *([0-9.]+) MiB\/s.*/\1/')
gbs=$(awk -v m="$mibs" 'BEGIN { printf "%.2f", m * 1048576 / 1e9 }')
echo "mbw -t0 1 thread, $size MiB: copy $gbs GB/s ($mibs MiB/s)"
target/release/examples/fabric_bench "$size" "$iters"
