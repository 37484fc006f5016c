#!/usr/bin/env bash
# Compile the GPU fabric kernels (KERNEL_SOURCE in
# crates/ldb-sys/src/cuda/kernels.rs) to PTX with clang's CUDA front end, on
# a machine without CUDA: a check of the source's syntax, types and inline
# PTX before it meets NVRTC on a GPU machine. Not a substitute for NVRTC
# (a different compiler) or for running the kernels.
#
# Usage: scripts/check-fabric-kernels.sh   (needs clang++ with the NVPTX
# target, e.g. Debian's clang-14; prints the PTX's entry points and the
# instructions the measurements rely on)
set -euo pipefail
cd "$(dirname "$0")/.."
clang=$(command -v clang++ || command -v clang++-14 || true)
if [ -z "$clang" ]; then
    echo "no clang++ here (apt-get install clang-14)" >&2
    exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# the source is the raw string between r#" and "#; in kernels.rs
sed -n '/^pub const KERNEL_SOURCE: &str = r#"$/,/^"#;$/p' crates/ldb-sys/src/cuda/kernels.rs |
    sed '1d;$d' >"$work/k.cu"
# what NVRTC provides built in, spelled for clang without the CUDA headers
cat >"$work/shim.h" <<'EOF'
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __forceinline__ __inline__ __attribute__((always_inline))
#include <__clang_cuda_builtin_vars.h>
__device__ inline void __threadfence_system() { __nvvm_membar_sys(); }
__device__ inline int atomicExch(int* p, int v) { return __nvvm_atom_xchg_gen_i(p, v); }
EOF
"$clang" -x cuda --cuda-device-only --cuda-gpu-arch=sm_80 -nocudainc -nocudalib \
    -std=c++17 -O3 -Wall -Werror -include "$work/shim.h" -S "$work/k.cu" -o "$work/k.ptx"
echo "== entry points"
grep '\.entry' "$work/k.ptx"
echo "== what the measurements rely on (counts)"
for op in 'ld.volatile.global.u64' '%globaltimer' 'membar.sys' 'st.volatile' 'cvt.f32.f16' 'cvt.rn.f16.f32' 'ld.v4.u32\|ld.global.v4.u32' 'st.global.v4.u32'; do
    printf '%-40s %s\n' "$op" "$(grep -c -- "$op" "$work/k.ptx" || true)"
done
