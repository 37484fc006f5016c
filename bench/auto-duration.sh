#!/usr/bin/env bash
# --duration auto against fixed 30 s windows: the same matrix on the built-in
# simulator twice, once with `--duration 30` and once with `--duration auto`
# (maximum 30 s, minimum 5 s, ±1 % target), and print the wall time of each
# run and every cell's value side by side. The claim it checks (issue 24):
# the auto run finishes at least 30 % faster at the same values within 1 %.
# The result is recorded in docs/performance.md §5. Not part of .ci/run
# (it takes about five minutes).
#
# Usage: bench/auto-duration.sh   (knobs below, as environment variables)
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${BIN:-target/debug/llm-decode-bench}
SCENARIO=${SCENARIO:-bench/auto-duration.toml}   # or quickstart (speculative decoding)
CONC=${CONC:-1,4,8}
CTXS=${CTXS:-0,8k}
MAX=${MAX:-30}
OUT=${OUT:-$(mktemp -d /tmp/ldb-auto-duration.XXXXXX)}

[ -x "$BIN" ] || cargo build -p llm-decode-bench
common=(--sim "$SCENARIO" --concurrency "$CONC" --contexts "$CTXS" --skip-prefill
        --decode-warmup-seconds 1 --display-mode plain)

run() {
    local name=$1; shift
    local t0 t1
    t0=$(date +%s.%N)
    "$BIN" "${common[@]}" "$@" --output "$OUT/$name.json" >"$OUT/$name.log" 2>&1
    t1=$(date +%s.%N)
    echo "$t0 $t1" >"$OUT/$name.time"
}

echo "== fixed: --duration $MAX"
run fixed --duration "$MAX"
echo "== auto: --duration auto --max-duration $MAX"
run auto --duration auto --max-duration "$MAX"

python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
def load(n):
    doc = json.load(open(f"{out}/{n}.json"))
    t0, t1 = map(float, open(f"{out}/{n}.time").read().split())
    return doc, t1 - t0
fixed, tf = load("fixed")
auto, ta = load("auto")
cells = {(c["concurrency"], c["context_tokens"]): c for c in fixed["results"]}
worst = 0.0
print(f"{'cell':>14} {'fixed tok/s':>12} {'auto tok/s':>11} {'diff %':>7} {'window s':>9} {'stopped_by':>12} {'ci95 ±%':>8}")
for a in auto["results"]:
    f = cells[(a["concurrency"], a["context_tokens"])]
    vf, va = f["aggregate_tps"], a["aggregate_tps"]
    d = (va / vf - 1) * 100
    worst = max(worst, abs(d))
    lo, hi = a.get("rate_ci95", [va, va])
    print(f"C={a['concurrency']:>3} ctx={a['context_tokens']:>6} {vf:>12.1f} {va:>11.1f} {d:>+7.2f} "
          f"{a['measurement_seconds']:>9.2f} {a.get('stopped_by', '-'):>12} {(hi - lo) / 2 / va * 100:>8.2f}")
print(f"wall: fixed {tf:.1f} s, auto {ta:.1f} s, auto is {(1 - ta / tf) * 100:.0f} % faster; "
      f"largest value difference {worst:.2f} %")
print(f"files: {out}")
PY
