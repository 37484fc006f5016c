#!/usr/bin/env bash
# Building the prompts of a 100,000-request trace (issue 25): a synthetic
# Mooncake trace (24 blocks of 512 tokens per request by default, the first
# third shared within 1,000 groups) read back through the streamed reader,
# every prompt built with its segments and fed to the intended prefix cache,
# with the release build. Prints the example's line and the peak memory
# (GNU time). Target: under 10 s, memory bounded (not growing with the
# trace). Knobs (environment): REQUESTS (100000), BLOCKS (24), NGROUPS (1000),
# OUT (target/trace-prompts).
set -euo pipefail
cd "$(dirname "$0")/.."

REQUESTS=${REQUESTS:-100000}
BLOCKS=${BLOCKS:-24}
NGROUPS=${NGROUPS:-1000}
OUT=${OUT:-target/trace-prompts}
mkdir -p "$OUT"

cargo build --release -q -p ldb-core --example trace_prompts
target_dir=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
ex="$target_dir/release/examples/trace_prompts"
if command -v /usr/bin/time >/dev/null; then
  /usr/bin/time -f "peak memory %M KiB, wall %e s (trace writing included)" \
    "$ex" "$OUT/trace.jsonl" "$REQUESTS" "$BLOCKS" "$NGROUPS"
else
  "$ex" "$OUT/trace.jsonl" "$REQUESTS" "$BLOCKS" "$NGROUPS"
fi
