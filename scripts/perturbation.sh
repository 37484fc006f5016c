#!/usr/bin/env bash
# How much does the benchmark's own CPU use slow the server it measures?
#
#   scripts/perturbation.sh [--concurrency "1 8"] [--seconds 20] [--rounds 2] [--out FILE]
#
# The benchmark usually runs on the server's host. This starts the real vLLM
# CPU server (scripts/vllm-server.sh, --max-num-seqs 8) and, for each
# concurrency C, drives the same decode load two ways, in alternating rounds
# so that drift hits both alike:
#   - minimal client: C shell loops of `curl -sN` sending the benchmark's kind
#     of request (streamed chat completion, ignore_eos, continuous usage) one
#     after another;
#   - this benchmark: one sustained cell at C (release build).
# The server's own rate is read from `vllm:generation_tokens_total` over the
# same length of time in both cases (for the benchmark, `server_gen_throughput`
# of its window). Also recorded: the CPU time each client used per second.
# Prints a Markdown table (and writes it to --out when given).
#
# Needs: scripts/vllm-server.sh build + model done, curl, python3. Loopback only.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
CONCS="1 8"
SECS=20
ROUNDS=2
OUT=""
PORT="${LDB_PERTURB_PORT:-8123}"
# C = 8 streams of prompt + 2,048 tokens fit the 1 GiB KV cache (23k tokens at
# --max-model-len 8192); 4,096 would not.
MAX_TOKENS=2048
while [[ $# -gt 0 ]]; do
  case "$1" in
    --concurrency) CONCS="$2"; shift 2 ;;
    --seconds) SECS="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    *) echo "perturbation.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

log() { printf 'perturbation.sh: %s\n' "$*" >&2; }
BASE="http://127.0.0.1:$PORT"
WORK="$(mktemp -d)"
cleanup() {
  jobs -p | xargs -r kill 2>/dev/null || true
  "$HERE/vllm-server.sh" stop --port "$PORT" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

log "building the benchmark (release)"
(cd "$ROOT" && cargo build --release -q -p llm-decode-bench)
BIN="$ROOT/target/release/llm-decode-bench"

log "starting vLLM on $BASE"
"$HERE/vllm-server.sh" start --port "$PORT" --extra --max-num-seqs 8 --max-model-len 8192 >/dev/null
MODEL="$(curl -s "$BASE/v1/models" | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"][0]["id"])')"

gen_tokens() {
  curl -s "$BASE/metrics" | awk '/^vllm:generation_tokens_total[{ ]/ {s += $NF} END {printf "%.0f\n", s}'
}

# CPU seconds (user + system) used so far by the given PIDs, their live
# descendants, and the descendants they already waited for.
cpu_of() {
  local pids=("$@") all=() p kids
  while [[ ${#pids[@]} -gt 0 ]]; do
    p=${pids[0]}; pids=("${pids[@]:1}")
    all+=("$p")
    kids=$(pgrep -P "$p" || true)
    for k in $kids; do pids+=("$k"); done
  done
  local hz; hz=$(getconf CLK_TCK)
  for p in "${all[@]}"; do cat "/proc/$p/stat" 2>/dev/null || true; done |
    awk -v hz="$hz" '{ sub(/^.*\) /, ""); t += $12 + $13 + $14 + $15 } END { printf "%.3f\n", t / hz }'
}

BODY="$WORK/body.json"
python3 - "$MODEL" "$MAX_TOKENS" >"$BODY" <<'PY'
import json, sys
print(json.dumps({
    "model": sys.argv[1],
    "messages": [{"role": "user", "content": "Write a long story about a lighthouse keeper."}],
    "max_tokens": int(sys.argv[2]),
    "stream": True,
    "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    "ignore_eos": True,
}))
PY

# One curl loop: requests back to back until the stop file appears.
curl_loop() {
  while [[ ! -e "$WORK/stop" ]]; do
    curl -sN -H 'Content-Type: application/json' --data @"$BODY" "$BASE/v1/chat/completions" >/dev/null || true
  done
}

# Server tokens/s and client CPU-seconds/s with C curl loops.
run_curl() {
  local c=$1 pids=() i
  rm -f "$WORK/stop"
  for ((i = 0; i < c; i++)); do curl_loop & pids+=($!); done
  sleep 5 # ramp-up, as the benchmark's readiness wait
  local g0 t0 c0 g1 t1 c1
  g0=$(gen_tokens); t0=$(date +%s.%N); c0=$(cpu_of "${pids[@]}")
  sleep "$SECS"
  g1=$(gen_tokens); t1=$(date +%s.%N); c1=$(cpu_of "${pids[@]}")
  touch "$WORK/stop"
  kill "${pids[@]}" 2>/dev/null || true
  pkill -f "curl -sN -H Content-Type: application/json" 2>/dev/null || true
  wait "${pids[@]}" 2>/dev/null || true
  sleep 3
  python3 -c "import sys; g0,g1,t0,t1,c0,c1=map(float,sys.argv[1:]); print(f'{(g1-g0)/(t1-t0):.3f} {(c1-c0)/(t1-t0):.4f}')" \
    "$g0" "$g1" "$t0" "$t1" "$c0" "$c1"
}

# Server tokens/s over the benchmark's window, and its CPU-seconds/s over the whole run.
run_bench() {
  local c=$1 out="$WORK/bench-$c.json" t0 t1 pid
  t0=$(date +%s.%N)
  "$BIN" --host "$BASE" --display-mode plain --concurrency "$c" --contexts 0 \
    --duration "$SECS" --max-tokens "$MAX_TOKENS" --skip-prefill --decode-warmup-seconds 0 \
    --no-hw-monitor --output "$out" >"$WORK/bench-$c.log" 2>&1 &
  pid=$!
  local cpu=0 now
  # the last reading before the process ends (a read racing its exit gives 0)
  while kill -0 "$pid" 2>/dev/null; do
    now=$(cpu_of "$pid")
    if python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) > float(sys.argv[2]) else 1)" "$now" "$cpu"; then
      cpu=$now
    fi
    sleep 0.5
  done
  wait "$pid" || true
  t1=$(date +%s.%N)
  sleep 3
  python3 - "$out" "$cpu" "$t0" "$t1" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
cell = doc["results"][0]
if cell["aggregate_tps"] is None:
    sys.exit(f"the cell was not measured: {cell['status']}: {cell['status_reason']}")
cpu, t0, t1 = map(float, sys.argv[2:])
print(f"{cell['server_gen_throughput']:.3f} {cpu / (t1 - t0):.4f} {cell['aggregate_tps']:.3f}")
PY
}

TABLE="| C | vLLM tok/s with curl | vLLM tok/s with llm-decode-bench | difference | curl CPU s/s | llm-decode-bench CPU s/s |
|---|---|---|---|---|---|"
for c in $CONCS; do
  curl_rates=() bench_rates=() curl_cpu=() bench_cpu=()
  for ((r = 0; r < ROUNDS; r++)); do
    for who in curl bench; do
      # alternate the order each round
      if (( r % 2 == 1 )); then who=$([[ $who == curl ]] && echo bench || echo curl); fi
      if [[ $who == curl ]]; then
        read -r rate cpu < <(run_curl "$c")
        curl_rates+=("$rate"); curl_cpu+=("$cpu")
        log "C=$c round $r curl: vLLM $rate tok/s, client CPU $cpu s/s"
      else
        read -r rate cpu agg < <(run_bench "$c")
        bench_rates+=("$rate"); bench_cpu+=("$cpu")
        log "C=$c round $r bench: vLLM $rate tok/s (client counted $agg), client CPU $cpu s/s"
      fi
    done
  done
  row=$(python3 - "${curl_rates[*]}" "${bench_rates[*]}" "${curl_cpu[*]}" "${bench_cpu[*]}" "$c" <<'PY'
import sys
mean = lambda s: sum(map(float, s.split())) / len(s.split())
cr, br, cc, bc = (mean(a) for a in sys.argv[1:5])
print(f"| {sys.argv[5]} | {cr:.2f} | {br:.2f} | {100 * (br - cr) / cr:+.1f} % | {cc:.3f} | {bc:.3f} |")
PY
)
  TABLE+=$'\n'"$row"
done
echo "$TABLE"
if [[ -n "$OUT" ]]; then echo "$TABLE" >"$OUT"; fi
