#!/usr/bin/env bash
# Shards at scale (issue 26; docs/shards.md): SHARDS coordinated processes ×
# STREAMS streams each against one paced simulator on this machine, one cell
# of C = SHARDS × STREAMS. Prints the cell's measured rate over the truth
# (the simulator's pacing: STEP_S per token per stream, and its own
# generation counter), and the leader's CPU per merged request sample
# (user + system seconds of the leader process over the requests it
# assembled), beside a follower's CPU for comparison.
#
# Knobs (environment): SHARDS (8), STREAMS (1024 per shard), STEP_S (0.1:
# 10 tok/s per stream), WINDOW (10 s), PORT (18531), COORD_PORT (18532),
# BIN (the release binary when built, else the debug one), OUT
# (target/shards-scale). Not part of .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."

SHARDS=${SHARDS:-8}
STREAMS=${STREAMS:-1024}
STEP_S=${STEP_S:-0.1}
WINDOW=${WINDOW:-10}
PORT=${PORT:-18531}
COORD_PORT=${COORD_PORT:-18532}
OUT=${OUT:-target/shards-scale}
if [ -z "${BIN:-}" ]; then
    BIN=target/release/llm-decode-bench
    [ -x "$BIN" ] || BIN=target/debug/llm-decode-bench
fi
[ -x "$BIN" ] || { echo "build first: cargo build -p llm-decode-bench" >&2; exit 2; }
mkdir -p "$OUT"
C=$((SHARDS * STREAMS))
cat > "$OUT/scenario.toml" <<TOML
name = "shards-scale"
description = "vLLM personality, paced steps, instant prefill (shard scale bench)"
personality = "vllm"
model = "sim-shards"
max_model_len = 1048576
seed = 1
[scheduler]
max_running = $C
prefill_tok_s = 1.0e12
prefill_chunk_tokens = 1048576
stream_interval = 1
[step_time]
base_s = $STEP_S
[kv]
block_size = 256
num_blocks = 1048576
cp = 1
prefix_caching = true
[tokenizer]
chars_per_token = 4.0
tokens_per_request = 8
tokens_per_message = 4
[server]
created = 1700000000
TOML

ulimit -Sn "$(ulimit -Hn)"
"$BIN" sim --scenario "$OUT/scenario.toml" --port "$PORT" >"$OUT/sim.log" 2>&1 &
SIM=$!
trap 'kill $SIM 2>/dev/null || true' EXIT
for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
    sleep 0.1
done

export LDB_SHARD_SECRET="$(openssl rand -hex 32)"
FLAGS=(--host "http://127.0.0.1:$PORT" --concurrency "$C" --contexts 0 --skip-prefill
    --duration "$WINDOW" --decode-warmup-seconds 0 --max-tokens 2000
    --display-mode plain --no-hw-monitor --shards "$SHARDS"
    --coordinator "127.0.0.1:$COORD_PORT" --output "$OUT/r.json")
for i in $(seq 1 $((SHARDS - 1))); do
    /usr/bin/time -f "%U %S" -o "$OUT/cpu-$i" "$BIN" "${FLAGS[@]}" --shard-index "$i" \
        >"$OUT/shard-$i.log" 2>&1 &
done
/usr/bin/time -f "%U %S" -o "$OUT/cpu-0" "$BIN" "${FLAGS[@]}" --shard-index 0 \
    >"$OUT/shard-0.log" 2>&1 || { echo "leader failed: see $OUT/shard-0.log" >&2; exit 1; }
wait $(jobs -p | grep -v "^$SIM$") 2>/dev/null || true

python3 - "$OUT" "$C" "$STEP_S" <<'PY'
import json, sys
out, c, step = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
cell = json.load(open(f"{out}/r.json"))["results"][0]
cpu = lambda i: sum(map(float, open(f"{out}/cpu-{i}").read().split()[-2:]))
truth = c / step
tps = cell["aggregate_tps"] or 0.0
n = len(cell["request_samples"])
print(f"C = {c} over {len(cell['shards'])} shards, status {cell['status']}")
print(f"measured {tps:.0f} tok/s, pacing truth {truth:.0f}: {tps / truth:.4f}")
print(f"client {cell['client_output_tokens']} tokens, simulator counter "
      f"{cell['server_output_tokens']}: {cell['client_output_tokens'] / max(cell['server_output_tokens'], 1):.4f}")
print(f"leader CPU {cpu(0):.2f} s for {n} merged request samples: "
      f"{cpu(0) / max(n, 1) * 1e3:.3f} ms per sample; follower 1 CPU {cpu(1):.2f} s")
print("clock uncertainty, ms:", [round(s["clock_uncertainty_s"] * 1e3, 3) for s in cell["shards"]])
PY
