#!/usr/bin/env bash
# How much does the benchmark's own CPU use slow the server it measures?
#
#   scripts/perturbation.sh [--concurrency "1 8"] [--seconds 15] [--rounds 6]
#                           [--doses "0 0.15 0.5"] [--scrape-rates "0 2 4"]
#                           [--parts "direct dose scrape readcpu"] [--out FILE]
#
# The benchmark usually runs on the server's host. This starts the real vLLM
# CPU server (scripts/vllm-server.sh, --max-num-seqs 8) and, for each
# concurrency C, drives the same decode load two ways, in alternating rounds
# so that drift hits both alike:
#   - minimal client: C shell loops of `curl -sN` sending the request body the
#     benchmark sends at context 0 (the same generation prompt behind a nonce,
#     streamed chat completion, ignore_eos, continuous usage, max_tokens) one
#     after another;
#   - this benchmark: one sustained cell at C (release build).
# The server's own rate is read from `vllm:generation_tokens_total` over the
# same length of time in both cases (for the benchmark, `server_gen_throughput`
# of its window). Also recorded: the CPU time each client used per second.
# Each round measures both drivers back to back; the difference is taken per
# round (bench vs curl of the same round) and summarised as a mean with a
# Student-t 95 % interval over the rounds, so slow drift of the machine cancels.
#
# Where the machine's own noise is larger than the effect (a CPU server that
# keeps every core busy moves by several per cent between rounds), the direct
# comparison cannot resolve 1 %. So the script also measures the server's
# sensitivity to client CPU: rounds of the curl load with a burner process
# that uses a known share of one core (--doses, fractions of a core; 0 is a
# round without burner), the doses of a round in alternating order so that
# drift of the machine does not pass for an effect, and a least-squares line
# of the server's rate against the CPU the burner really used. The line's
# slope times the benchmark's own CPU use is the slowdown the benchmark's CPU
# can cause; it is printed with its 95 % interval.
#
# The benchmark's load on the server is not only its own CPU: it reads the
# server's /metrics (every 0.5 s during ramp-up, every --metrics-interval
# inside a window), and the server spends CPU answering. The third part
# measures that alone, in the same way as the second: rounds of the curl load
# with /metrics fetched at each of --scrape-rates reads per second (0: none),
# in alternating order, and a line of the server's rate against the reads per
# second really made. Its slope is the cost of one read; times the
# benchmark's in-window pace it is the slowdown those reads cause.
# The fourth part (readcpu, not in the default) needs no load and no CPU to
# spare, so it also works on a machine other jobs keep busy: the CPU time
# the server's API process spends answering one /metrics read, from its own
# /proc counters over --reads reads in a row, minus what it used in as long
# a time without reads, once on a fresh server and once after a C = 8 batch
# filled the histograms (a larger page).
# --parts chooses which parts run (default: direct, dose and scrape).
# Prints a Markdown table (and writes it to --out when given).
#
# Needs: scripts/vllm-server.sh build + model done, curl, python3. Loopback only.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
CONCS="1 8"
SECS=15
ROUNDS=6
DOSES="0 0.15 0.5"
SCRAPE_RATES="0 2 4"
READS=200
# the benchmark's default --metrics-interval (crates/ldb-runner/src/config.rs)
METRICS_INTERVAL=10
PARTS="direct dose scrape"
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
    --doses) DOSES="$2"; shift 2 ;;
    --scrape-rates) SCRAPE_RATES="$2"; shift 2 ;;
    --parts) PARTS="$2"; shift 2 ;;
    --reads) READS="$2"; shift 2 ;;
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

BIN="$ROOT/target/release/llm-decode-bench"
has() { [[ " $PARTS " == *" $1 "* ]]; }
# the benchmark itself runs in the direct part (the dose part reuses its CPU figure)
if has direct || has dose; then
  log "building the benchmark (release)"
  (cd "$ROOT" && cargo build --release -q -p llm-decode-bench)
fi

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

# The body the benchmark sends at context 0 (ldb_core::prompt::GENERATION_PROMPT
# behind a nonce; see crates/ldb-runner/src/prompts.rs chat_body), so that both
# drivers ask the server for the same work.
write_body() {
  python3 - "$MODEL" "$MAX_TOKENS" "$1" >"$BODY" <<'PY'
import json, sys
prompt = ("Write a very long and detailed encyclopedia article about the history of astronomy, "
          "from the earliest sky watchers to modern space telescopes. Cover every period, the people involved, "
          "their instruments and their methods, and keep going in full detail; do not summarize or stop early.")
print(json.dumps({
    "model": sys.argv[1],
    "messages": [{"role": "user", "content": f"[ldb perturb-{sys.argv[3]}] {prompt}"}],
    "stream": True,
    "max_tokens": int(sys.argv[2]),
    "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    "ignore_eos": True,
}))
PY
}
BODY="$WORK/body.json"

# One curl loop: requests back to back until the stop file appears.
curl_loop() {
  while [[ ! -e "$WORK/stop" ]]; do
    curl -sN -H 'Content-Type: application/json' --data @"$BODY" "$BASE/v1/chat/completions" >/dev/null || true
  done
}

# Server tokens/s and client CPU-seconds/s with C curl loops.
# A process that keeps a share ($1, a fraction of one core) of the CPU busy
# until the stop file appears: busy for that share of every 10 ms, asleep the rest.
burner() {
  python3 - "$1" "$WORK/stop" <<'PY'
import os, sys, time
share, stop = float(sys.argv[1]), sys.argv[2]
period, n = 0.010, 0
while True:
    n += 1
    if n % 50 == 0 and os.path.exists(stop):
        break
    t = time.perf_counter()
    while time.perf_counter() - t < share * period:
        pass
    time.sleep((1 - share) * period)
PY
}

# /metrics $1 times a second, as the benchmark's scraper, until the stop
# file appears; each read is counted as a line of $WORK/reads.
scrape_loop() {
  local period
  period=$(python3 -c "import sys; print(1 / float(sys.argv[1]))" "$1")
  while [[ ! -e "$WORK/stop" ]]; do
    curl -s "$BASE/metrics" >/dev/null && echo >>"$WORK/reads" || true
    sleep "$period"
  done
}

# Server tokens/s, client CPU-seconds/s and burner CPU-seconds/s with C curl
# loops and, when $2 > 0, a burner using that share of a core; when $3 > 0,
# also /metrics read $3 times a second (then the reads per second made over
# the measured time are printed as a fourth value).
run_curl() {
  local c=$1 dose=${2:-0} scrape=${3:-0} pids=() i burn=()
  rm -f "$WORK/stop" "$WORK/reads"
  touch "$WORK/reads"
  write_body "c$c-$RANDOM$RANDOM"
  for ((i = 0; i < c; i++)); do curl_loop & pids+=($!); done
  if python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) > 0 else 1)" "$scrape"; then
    scrape_loop "$scrape" &
    pids+=($!)
  fi
  if python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) > 0 else 1)" "$dose"; then
    burner "$dose" & burn=($!)
  fi
  sleep 5 # ramp-up, as the benchmark's readiness wait
  local g0 t0 c0 g1 t1 c1 b0=0 b1=0 n0 n1
  g0=$(gen_tokens); t0=$(date +%s.%N); c0=$(cpu_of "${pids[@]}")
  n0=$(wc -l <"$WORK/reads")
  if [[ ${#burn[@]} -gt 0 ]]; then b0=$(cpu_of "${burn[@]}"); fi
  sleep "$SECS"
  g1=$(gen_tokens); t1=$(date +%s.%N); c1=$(cpu_of "${pids[@]}")
  n1=$(wc -l <"$WORK/reads")
  if [[ ${#burn[@]} -gt 0 ]]; then b1=$(cpu_of "${burn[@]}"); fi
  touch "$WORK/stop"
  kill "${pids[@]}" 2>/dev/null || true
  pkill -f "curl -sN -H Content-Type: application/json" 2>/dev/null || true
  wait "${pids[@]}" "${burn[@]}" 2>/dev/null || true
  sleep 3
  python3 -c "import sys; g0,g1,t0,t1,c0,c1,b0,b1,n0,n1=map(float,sys.argv[1:]); d=t1-t0; print(f'{(g1-g0)/d:.3f} {(c1-c0)/d:.4f} {(b1-b0)/d:.4f} {(n1-n0)/d:.3f}')" \
    "$g0" "$g1" "$t0" "$t1" "$c0" "$c1" "$b0" "$b1" "$n0" "$n1"
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

TABLE="| C | rounds | vLLM tok/s with curl | vLLM tok/s with llm-decode-bench | difference (mean ± 95 % CI of per-round differences) | curl CPU s/s | llm-decode-bench CPU s/s |
|---|---|---|---|---|---|---|"
STABLE="| C | points | vLLM tok/s at no extra CPU (fit) | rate change per CPU-s/s taken (95 % CI) | llm-decode-bench CPU s/s | slowdown the benchmark's CPU can cause |
|---|---|---|---|---|---|"
RTABLE="| C | points | vLLM tok/s without /metrics reads (fit) | rate change per /metrics read a second (95 % CI) | server time lost per read | slowdown at 2 reads/s (every 0.5 s) | slowdown at the window's pace (every ${METRICS_INTERVAL} s) |
|---|---|---|---|---|---|---|"
# mean ± Student-t 95 % half-width of per-round relative differences, in %
paired() {
  python3 - "$1" "$2" <<'PY'
import math, sys
a = [float(x) for x in sys.argv[1].split()]
b = [float(x) for x in sys.argv[2].split()]
d = [100 * (y - x) / x for x, y in zip(a, b)]
n, m = len(d), sum(d) / len(d)
T = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
     2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086]
if n > 1:
    sd = math.sqrt(sum((x - m) ** 2 for x in d) / (n - 1))
    print(f"{m:+.2f} % ± {(T[n - 2] if n - 1 <= len(T) else 1.96) * sd / math.sqrt(n):.2f} %")
else:
    print(f"{m:+.2f} %")
PY
}
# Least-squares line of ys on xs: "points intercept slope half-width", the
# slope and its Student-t 95 % half-width as % of the intercept per unit of x.
fit_line() {
  python3 - "$1" "$2" <<'PY'
import math, sys
xs = [float(v) for v in sys.argv[1].split()]
ys = [float(v) for v in sys.argv[2].split()]
n = len(xs)
mx, my = sum(xs) / n, sum(ys) / n
sxx = sum((x - mx) ** 2 for x in xs)
b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
a = my - b * mx
se = math.sqrt(sum((y - a - b * x) ** 2 for x, y in zip(xs, ys)) / (n - 2) / sxx)
T = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
     2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086]
t = T[n - 3] if n - 2 <= len(T) else 1.96
print(f"{n} {a:.3f} {100 * b / a:.4f} {abs(100 * t * se / a):.4f}")
PY
}
# "±x %" rows of a fitted slope (% per unit) times a dose
times() {
  python3 -c "import sys; s,h,d=map(float,sys.argv[1:]); print(f'{s*d:+.2f} % ± {h*d:.2f} %')" "$1" "$2" "$3"
}
# CPU seconds (user + system) the process $1 itself has used (its threads,
# not its children: vLLM's engine core is a child of the API process).
own_cpu() {
  awk -v hz="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); printf "%.3f\n", ($12 + $13) / hz }' "/proc/$1/stat"
}
# "ms of API CPU per read, page kB": $READS reads in a row against a
# stretch as long without reads.
read_cost() {
  local api=$1 c0 c1 c2 t0 t1 t2 kb i
  kb=$(curl -s "$BASE/metrics" | wc -c)
  c0=$(own_cpu "$api"); t0=$(date +%s.%N)
  for ((i = 0; i < READS; i++)); do curl -s "$BASE/metrics" >/dev/null; done
  c1=$(own_cpu "$api"); t1=$(date +%s.%N)
  sleep "$(python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$t0" "$t1")"
  c2=$(own_cpu "$api"); t2=$(date +%s.%N)
  python3 -c "import sys; c0,c1,c2,t0,t1,t2,n,kb=map(float,sys.argv[1:]); base=(c2-c1)/(t2-t1)*(t1-t0); print(f'{1000*((c1-c0)-base)/n:.1f} {kb/1000:.0f} {(t1-t0)/n*1000:.0f}')" \
    "$c0" "$c1" "$c2" "$t0" "$t1" "$t2" "$READS" "$kb"
}
if has readcpu; then
  API_PID="$(cat "${LDB_CACHE_DIR:-$HOME/.cache/llm-decode-bench}/run/vllm-server-$PORT.pid")"
  CTABLE="| page | reads | API process CPU per read | page size | wall time per read |
|---|---|---|---|---|"
  read -r ms kb wall < <(read_cost "$API_PID")
  CTABLE+=$'\n'"| fresh server | $READS | $ms ms | $kb kB | $wall ms |"
  log "fresh server: $ms ms of API CPU per read ($kb kB page, $wall ms each)"
  # a batch of C = 8 requests of 64 tokens fills the latency histograms
  write_body "readcpu-$RANDOM"
  python3 - "$BODY" <<'PY' >"$WORK/short.json"
import json, sys
b = json.load(open(sys.argv[1])); b["max_tokens"] = 64
print(json.dumps(b))
PY
  for ((i = 0; i < 8; i++)); do
    curl -sN -H 'Content-Type: application/json' --data @"$WORK/short.json" "$BASE/v1/chat/completions" >/dev/null &
  done
  wait
  read -r ms kb wall < <(read_cost "$API_PID")
  CTABLE+=$'\n'"| after a C = 8 batch | $READS | $ms ms | $kb kB | $wall ms |"
  log "after a batch: $ms ms of API CPU per read ($kb kB page, $wall ms each)"
fi
for c in $CONCS; do
  curl_rates=() bench_rates=() curl_cpu=() bench_cpu=()
  if has scrape; then
    # every round runs each read rate once, in alternating order
    xs=() ys=()
    for ((r = 0; r < ROUNDS; r++)); do
      order=$SCRAPE_RATES
      if (( r % 2 == 1 )); then order=$(printf '%s\n' $SCRAPE_RATES | tac | xargs); fi
      for sr in $order; do
        read -r rate _ _ reads < <(run_curl "$c" 0 "$sr")
        xs+=("$reads"); ys+=("$rate")
        log "C=$c round $r curl + /metrics $sr/s (made $reads/s): vLLM $rate tok/s"
      done
    done
    read -r n a s h < <(fit_line "${xs[*]}" "${ys[*]}")
    # one read a second costs s % of the rate: -s/100 s of server time per read
    lost=$(python3 -c "import sys; s,h=map(float,sys.argv[1:]); print(f'{-10*s:.1f} ms ± {10*h:.1f} ms')" "$s" "$h")
    at=$(python3 -c "import sys; print(1 / float(sys.argv[1]))" "$METRICS_INTERVAL")
    RTABLE+=$'\n'"| $c | $n | $a | $(printf '%+.2f %% ± %.2f %%' "$s" "$h") | $lost | $(times "$s" "$h" 2) | $(times "$s" "$h" "$at") |"
  fi
  has direct || has dose || continue
  for ((r = 0; r < ROUNDS; r++)); do
    for who in curl bench; do
      # alternate the order each round
      if (( r % 2 == 1 )); then who=$([[ $who == curl ]] && echo bench || echo curl); fi
      if [[ $who == curl ]]; then
        read -r rate cpu _ < <(run_curl "$c")
        curl_rates+=("$rate"); curl_cpu+=("$cpu")
        log "C=$c round $r curl: vLLM $rate tok/s, client CPU $cpu s/s"
      else
        read -r rate cpu agg < <(run_bench "$c")
        bench_rates+=("$rate"); bench_cpu+=("$cpu")
        log "C=$c round $r bench: vLLM $rate tok/s (client counted $agg), client CPU $cpu s/s"
      fi
    done
  done
  row=$(python3 - "${curl_rates[*]}" "${bench_rates[*]}" "${curl_cpu[*]}" "${bench_cpu[*]}" "$c" "$(paired "${curl_rates[*]}" "${bench_rates[*]}")" <<'PY'
import sys
vals = lambda s: [float(x) for x in s.split()]
cr, br, cc, bc = (vals(a) for a in sys.argv[1:5])
mean = lambda v: sum(v) / len(v)
print(f"| {sys.argv[5]} | {len(cr)} | {mean(cr):.2f} | {mean(br):.2f} | {sys.argv[6]} | {mean(cc):.3f} | {mean(bc):.3f} |")
PY
)
  TABLE+=$'\n'"$row"
  has dose || continue
  # Sensitivity: every round runs each dose once, in alternating order.
  xs=() ys=()
  for ((r = 0; r < ROUNDS; r++)); do
    order=$DOSES
    if (( r % 2 == 1 )); then order=$(printf '%s\n' $DOSES | tac | xargs); fi
    for dose in $order; do
      read -r rate _ burned _ < <(run_curl "$c" "$dose")
      xs+=("$burned"); ys+=("$rate")
      log "C=$c round $r burner $dose of a core: vLLM $rate tok/s, burner CPU $burned s/s"
    done
  done
  # slope as % of the unloaded rate per CPU-second per second taken
  read -r n a s h < <(fit_line "${xs[*]}" "${ys[*]}")
  bcpu=$(python3 -c "import sys; v=[float(x) for x in sys.argv[1].split()]; print(f'{sum(v)/len(v):.4f}')" "${bench_cpu[*]}")
  STABLE+=$'\n'"| $c | $n | $a | $(printf '%+.1f %% ± %.1f %%' "$s" "$h") | $bcpu | $(times "$s" "$h" "$bcpu") |"
done
REPORT=""
has direct && REPORT+="$TABLE"$'\n\n'
has dose && REPORT+="$STABLE"$'\n\n'
has scrape && REPORT+="$RTABLE"$'\n'
has readcpu && REPORT+=$'\n'"$CTABLE"$'\n'
printf '%s' "$REPORT"
if [[ -n "$OUT" ]]; then printf '%s' "$REPORT" >"$OUT"; fi
