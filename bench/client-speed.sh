#!/usr/bin/env bash
# Whole-process client speed bench (issue 3, "Speed"); results and how to read
# them: docs/performance.md.
#
# The simulator (scenario firehose-paced: 1,024 running, one token per chunk,
# 8 ms steps, about 128,000 tok/s at C=1024) runs as its own process pinned to
# one core; the measuring client (crates/ldb-runner/examples/client_speed.rs,
# the same streaming code as a decode cell) runs pinned to the other core. For
# each concurrency it prints the client's CPU time per token, the measured
# window tokens against the simulator's generation counter, added TTFT and
# resident memory per stream. With RAW=1 (default) a bare-socket floor run at
# the largest concurrency follows.
#
# Knobs (environment): CONCURRENCY ("1 64 1024"), WINDOW (10 s), WARMUP (2 s),
# MAX_TOKENS (512), PORT (18123), SCENARIO, SIM_CPU (0), CLIENT_CPU (1), RAW (1),
# READERS ("lean": the stream readers to run, "lean reqwest" for both; see
# LDB_STREAM_READER in docs/performance.md), OUT (target/client-speed),
# ROUNDS (1: how many times the whole set runs, interleaved, so that a drift
# of the shared machine hits the readers and the floor alike).
# At the end it prints each reader's CPU per token at the largest C over the
# floor's CPU per chunk of the same round (the ratio issue 14 targets), and
# with several rounds their mean and range.
set -euo pipefail
cd "$(dirname "$0")/.."

CONCURRENCY=${CONCURRENCY:-"1 64 1024"}
WINDOW=${WINDOW:-10}
WARMUP=${WARMUP:-2}
MAX_TOKENS=${MAX_TOKENS:-512}
PORT=${PORT:-18123}
SCENARIO=${SCENARIO:-scenarios/firehose-paced.toml}
SIM_CPU=${SIM_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
RAW=${RAW:-1}
READERS=${READERS:-lean}
OUT=${OUT:-target/client-speed}
ROUNDS=${ROUNDS:-1}

cargo build --release -p llm-decode-bench -p ldb-runner \
    --bin llm-decode-bench --example client_speed
mkdir -p "$OUT"

# The command prefix that pins to core $1 when taskset works here (none otherwise).
pin() {
    if command -v taskset >/dev/null 2>&1 && taskset -c "$1" true 2>/dev/null; then
        echo "taskset -c $1"
    fi
}

url="http://127.0.0.1:$PORT"
if curl -sf "$url/health" >/dev/null 2>&1; then
    echo "error: something already serves $url; choose another PORT" >&2
    exit 1
fi
# No function or subshell around it, so that $! is the simulator itself.
# shellcheck disable=SC2046
$(pin "$SIM_CPU") target/release/llm-decode-bench sim --scenario "$SCENARIO" --port "$PORT" \
    >"$OUT/sim.log" 2>&1 &
SIM_PID=$!
trap 'kill "$SIM_PID" 2>/dev/null || true; wait "$SIM_PID" 2>/dev/null || true' EXIT
for _ in $(seq 100); do
    if curl -sf "$url/health" >/dev/null 2>&1; then
        break
    fi
    if ! kill -0 "$SIM_PID" 2>/dev/null; then
        echo "error: the simulator exited:" >&2
        cat "$OUT/sim.log" >&2
        exit 1
    fi
    sleep 0.1
done
curl -sf "$url/health" >/dev/null && kill -0 "$SIM_PID" 2>/dev/null ||
    { echo "error: no simulator at $url" >&2; exit 1; }

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "simulator: $SCENARIO on cpu $SIM_CPU; client on cpu $CLIENT_CPU; window ${WINDOW}s, max_tokens $MAX_TOKENS"
: >"$OUT/results.jsonl"
# Each JSON line gets its round, so the summary divides by the floor of the same round.
record() { sed -n "s/^JSON {/{\"round\":$1,/p" "$OUT/run.txt" >>"$OUT/results.jsonl"; }
last=1
for round in $(seq "$ROUNDS"); do
    [ "$ROUNDS" -gt 1 ] && echo "-- round $round of $ROUNDS"
    for reader in $READERS; do
        for c in $CONCURRENCY; do
            # shellcheck disable=SC2046
            LDB_STREAM_READER=$reader $(pin "$CLIENT_CPU") target/release/examples/client_speed \
                --url "$url" --concurrency "$c" --window "$WINDOW" --warmup "$WARMUP" \
                --max-tokens "$MAX_TOKENS" | tee "$OUT/run.txt" | grep -v '^JSON '
            record "$round"
            last=$c
        done
    done
    if [ "$RAW" = 1 ]; then
        # shellcheck disable=SC2046
        $(pin "$CLIENT_CPU") target/release/examples/client_speed --raw --url "$url" --concurrency "$last" \
            --window "$WINDOW" --warmup "$WARMUP" --max-tokens "$MAX_TOKENS" | tee "$OUT/run.txt" | grep -v '^JSON '
        record "$round"
    fi
done
if [ "$RAW" = 1 ] && command -v python3 >/dev/null 2>&1; then
    python3 - "$OUT/results.jsonl" "$last" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
c = int(sys.argv[2])
ratios = {}
for rnd in sorted({r["round"] for r in rows}):
    floor = [r for r in rows if r["round"] == rnd and r["mode"] == "raw" and r["concurrency"] == c]
    if not floor:
        continue
    f = floor[-1]["cpu_us_per_chunk"]
    for r in rows:
        if r["round"] == rnd and r["mode"] == "client" and r["concurrency"] == c:
            reader = r.get("reader", "reqwest")
            ratios.setdefault(reader, []).append(r["cpu_us_per_token"] / f)
            print(f"round {rnd} C={c} {reader}: {r['cpu_us_per_token']:.3f} us/token = "
                  f"{r['cpu_us_per_token'] / f:.2f} x floor ({f:.3f} us/chunk); "
                  f"measured/truth {r['measured_tokens'] / r['truth_tokens']:.4f}; "
                  f"{r['rss_per_stream_kb']:.1f} kB/stream")
for reader, v in ratios.items():
    if len(v) > 1:
        print(f"C={c} {reader}: mean {sum(v) / len(v):.2f} x floor over {len(v)} rounds "
              f"(range {min(v):.2f} to {max(v):.2f})")
PY
fi
echo "JSON lines: $OUT/results.jsonl"
