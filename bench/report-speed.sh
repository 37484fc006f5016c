#!/usr/bin/env bash
# Speed of `llm-decode-bench report` on a large result (issue 12): a made-up
# file of 200 cells and just over 100,000 request samples (written by
# crates/ldb-report/examples/synthetic_result.rs), reported four ways with the
# release build. Prints the best of RUNS wall times of each and the ratio of
# each to the plain text report, plus the sizes of the files written.
# Results and how to read them: docs/performance.md, "Report speed".
#
# Knobs (environment): RUNS (3), CONCURRENCIES (20), CONTEXTS (10),
# SAMPLES (667 per measured cell), REPEATS (5 per cell, as --repeat 5),
# OUT (target/report-speed).
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-3}
CONCURRENCIES=${CONCURRENCIES:-20}
CONTEXTS=${CONTEXTS:-10}
SAMPLES=${SAMPLES:-667}
REPEATS=${REPEATS:-5}
OUT=${OUT:-target/report-speed}
mkdir -p "$OUT"

cargo build --release -q -p llm-decode-bench
cargo build --release -q -p ldb-report --example synthetic_result
target_dir=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
bin="$target_dir/release/llm-decode-bench"
[[ -x "$bin" ]] || { echo "no release binary at $bin" >&2; exit 1; }
"$target_dir/release/examples/synthetic_result" "$OUT/result.json" "$CONCURRENCIES" "$CONTEXTS" "$SAMPLES" "$REPEATS"
ls -l "$OUT/result.json" | awk '{printf "result file: %.1f MB\n", $5 / 1e6}'

# Best wall time of RUNS runs of a command, in seconds.
best() {
    local b="" t start
    for _ in $(seq "$RUNS"); do
        start=$(date +%s.%N)
        "$@" >/dev/null || { echo "failed: $*" >&2; exit 1; }
        t=$(awk "BEGIN{printf \"%.3f\", $(date +%s.%N) - $start}")
        if [[ -z "$b" ]] || awk "BEGIN{exit !($t < $b)}"; then b=$t; fi
    done
    echo "$b"
}

text=$(best "$bin" report "$OUT/result.json")
html=$(best "$bin" report "$OUT/result.json" --html "$OUT/report.html")
jsonl=$(best "$bin" report "$OUT/result.json" --requests-jsonl "$OUT/requests.jsonl")
both=$(best "$bin" report "$OUT/result.json" --html "$OUT/report.html" --requests-jsonl "$OUT/requests.jsonl")

printf '%-34s %8s %10s\n' "report" "best s" "÷ text"
for row in "text only:$text" "--html:$html" "--requests-jsonl:$jsonl" "--html --requests-jsonl:$both"; do
    name=${row%%:*}; t=${row##*:}
    printf '%-34s %8s %10s\n' "$name" "$t" "$(awk "BEGIN{printf \"%.2f\", $t / ($text > 0 ? $text : 0.01)}")"
done
ls -l "$OUT/report.html" | awk '{printf "HTML page: %.0f kB\n", $5 / 1e3}'
printf 'JSONL: %s lines, %.1f MB\n' "$(wc -l <"$OUT/requests.jsonl")" \
    "$(ls -l "$OUT/requests.jsonl" | awk '{print $5 / 1e6}')"
