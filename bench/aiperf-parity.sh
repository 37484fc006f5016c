#!/usr/bin/env bash
# AIPerf parity: run NVIDIA AIPerf and our --request-count mode against the same
# simulator scenario at the same concurrency, request count, warmup and output
# length, and print both output-token throughputs side by side.
#
# AIPerf (about 1 GB of Python packages) goes into a throwaway virtual
# environment outside the repository: $LDB_CACHE_DIR/aiperf-venv (default
# /tmp/ldb-cache). It is not part of .ci/run.
#
# AIPerf needs a tokenizer on disk (`--tokenizer builtin` downloads one at run
# time). We train a small byte-level BPE on the Shakespeare text AIPerf ships
# for its synthetic prompts, and pass --use-server-token-count so every token
# count AIPerf reports comes from the server's usage, as ours does.
#
# Usage: bench/aiperf-parity.sh   (knobs below, as environment variables)
set -euo pipefail
cd "$(dirname "$0")/.."

CACHE=${LDB_CACHE_DIR:-/tmp/ldb-cache}
VENV=$CACHE/aiperf-venv
TOK=$CACHE/aiperf-tokenizer
AIPERF_SPEC=${AIPERF_SPEC:-aiperf}          # e.g. aiperf==0.13.0
SCENARIO=${SCENARIO:-quickstart}
PORT=${PORT:-18431}
C=${C:-4}                                    # concurrency
N=${N:-40}                                   # measured requests
W=${W:-$C}                                   # warmup requests
OSL=${OSL:-256}                              # output tokens per request (ignore_eos)
ISL=${ISL:-64}                               # AIPerf synthetic prompt tokens
SEED=${SEED:-1}
REPEAT=${REPEAT:-3}                          # alternating rounds (ours, AIPerf)
OUT=${OUT:-$CACHE/parity-$(date +%Y%m%d-%H%M%S)}

step() { printf '\n== %s\n' "$*"; }

step "AIPerf in $VENV"
if [ ! -x "$VENV/bin/aiperf" ]; then
    mkdir -p "$CACHE"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q --upgrade pip
    "$VENV/bin/pip" install -q "$AIPERF_SPEC" tokenizers
fi
"$VENV/bin/pip" list 2>/dev/null | grep -E '^(aiperf|tokenizers) '

step "tokenizer in $TOK"
if [ ! -f "$TOK/tokenizer.json" ]; then
    "$VENV/bin/python" - "$TOK" <<'PY'
import json, pathlib, sys
import aiperf
from tokenizers import ByteLevelBPETokenizer

out = pathlib.Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
corpus = next(pathlib.Path(aiperf.__file__).parent.rglob("shakespeare.txt"))
tok = ByteLevelBPETokenizer()
tok.train([str(corpus)], vocab_size=4096, min_frequency=2,
          special_tokens=["<|endoftext|>"])
tok.save(str(out / "tokenizer.json"))
(out / "tokenizer_config.json").write_text(json.dumps({
    "tokenizer_class": "PreTrainedTokenizerFast",
    "bos_token": "<|endoftext|>",
    "eos_token": "<|endoftext|>",
    "unk_token": "<|endoftext|>",
    "model_max_length": 1048576,
}, indent=1))
print(f"trained on {corpus}")
PY
fi
ls "$TOK"

step "llm-decode-bench (release)"
cargo build --release -q -p llm-decode-bench
BIN=target/release/llm-decode-bench
mkdir -p "$OUT"

step "simulator: scenario $SCENARIO on port $PORT"
"$BIN" sim --scenario "$SCENARIO" --port "$PORT" >"$OUT/sim.log" 2>&1 &
SIM_PID=$!
trap 'kill "$SIM_PID" 2>/dev/null || true' EXIT
URL=http://127.0.0.1:$PORT
for _ in $(seq 1 100); do
    curl -fs "$URL/v1/models" >/dev/null 2>&1 && break
    sleep 0.1
done
MODEL=$(curl -fs "$URL/v1/models" | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"][0]["id"])')
echo "model $MODEL at $URL"

ours() {
    "$BIN" --host "$URL" --concurrency "$C" --contexts 0 --max-tokens "$OSL" \
        --request-count "$N" --warmup-request-count "$W" --skip-prefill \
        --decode-warmup-seconds 0 --no-hw-monitor --no-calibration-cache \
        --display-mode plain --output "$1" >"$1.log" 2>&1
}

aiperf_run() {
    "$VENV/bin/aiperf" profile -m "$MODEL" --url "$URL" --endpoint-type chat --streaming \
        --concurrency "$C" --request-count "$N" --warmup-request-count "$W" \
        --synthetic-input-tokens-mean "$ISL" --synthetic-input-tokens-stddev 0 \
        --output-tokens-mean "$OSL" --output-tokens-stddev 0 --extra-inputs ignore_eos:true \
        --tokenizer "$TOK" --use-server-token-count --no-gpu-telemetry --no-server-metrics \
        --random-seed "$SEED" --ui-type none --export-level records --artifact-dir "$1" \
        >"$1.log" 2>&1 || { tail -40 "$1.log"; exit 1; }
}

for i in $(seq 1 "$REPEAT"); do
    step "round $i/$REPEAT: llm-decode-bench --request-count $N --warmup-request-count $W (C=$C, max_tokens $OSL)"
    ours "$OUT/ldb-$i.json"
    step "round $i/$REPEAT: aiperf profile --concurrency $C --request-count $N --warmup-request-count $W (osl $OSL)"
    aiperf_run "$OUT/aiperf-$i"
done

step "parity: scenario $SCENARIO, C=$C, N=$N, W=$W, OSL=$OSL, $REPEAT rounds"
python3 - "$OUT" "$REPEAT" <<'PY'
import json, pathlib, statistics, sys

out, rounds = pathlib.Path(sys.argv[1]), int(sys.argv[2])

def in_flight(spans):
    """Time-weighted mean of requests in flight between the first start and last end."""
    ev = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans])
    t0, t1 = ev[0][0], ev[-1][0]
    cur = acc = 0.0
    last = t0
    for t, d in ev:
        acc += cur * (t - last)
        cur += d
        last = t
    return acc / (t1 - t0)

def reissue_gap_ms(spans, workers):
    """Median time from a request's end to the next request's start (closed loop)."""
    starts = sorted(a for a, _ in spans)
    ends = sorted(b for _, b in spans)[:-workers]
    gaps = []
    for e in ends:
        nxt = [s for s in starts if s >= e]
        if nxt:
            gaps.append((nxt[0] - e) * 1e3)
    return statistics.median(gaps) if gaps else float("nan")

rows = {"AIPerf": [], "llm-decode-bench": []}
for i in range(1, rounds + 1):
    c = json.load(open(out / f"ldb-{i}.json"))["results"][0]
    spans = [(s["start_s"], s["end_s"]) for s in c["request_samples"] if s["end_s"] is not None]
    rows["llm-decode-bench"].append(dict(
        tps=c["aggregate_tps"], tokens=c["client_output_tokens"], secs=c["measurement_seconds"],
        ttft=c["ttft_avg"] * 1e3, lat=c["request_latency_avg"] * 1e3, isl=c["input_seq_len_avg"],
        inflight=in_flight(spans), gap=reissue_gap_ms(spans, c["concurrency"])))
    d = json.load(open(next((out / f"aiperf-{i}").rglob("profiling/profile_export_aiperf.json"))))
    recs = [json.loads(l) for l in open(next((out / f"aiperf-{i}").rglob("profile_export.jsonl")))]
    recs = [r for r in recs if r["metadata"]["benchmark_phase"] == "profiling"]
    spans = [(r["metadata"]["request_start_ns"] / 1e9, r["metadata"]["request_end_ns"] / 1e9) for r in recs]
    rows["AIPerf"].append(dict(
        tps=d["output_token_throughput"]["avg"], tokens=d["total_output_tokens"]["avg"],
        secs=d["benchmark_duration"]["avg"], ttft=d["time_to_first_token"]["avg"],
        lat=d["request_latency"]["avg"], isl=d["input_sequence_length"]["avg"],
        inflight=in_flight(spans), gap=reissue_gap_ms(spans, int(d["input_config"]["phases"][-1]["concurrency"]))))

print(f"{'tool':18} {'round':>5} {'tok/s':>9} {'tokens':>7} {'window s':>9} {'TTFT ms':>8} "
      f"{'latency ms':>10} {'ISL':>5} {'in flight':>9} {'re-send ms':>10}")
for tool, rs in rows.items():
    for i, r in enumerate(rs, 1):
        print(f"{tool:18} {i:>5} {r['tps']:9.2f} {r['tokens']:7.0f} {r['secs']:9.4f} {r['ttft']:8.1f} "
              f"{r['lat']:10.1f} {r['isl']:5.0f} {r['inflight']:9.3f} {r['gap']:10.2f}")
ma = statistics.median(r["tps"] for r in rows["AIPerf"])
mo = statistics.median(r["tps"] for r in rows["llm-decode-bench"])
print(f"\nmedian AIPerf output token throughput    {ma:10.2f} tok/s")
print(f"median llm-decode-bench request-count    {mo:10.2f} tok/s  ({(mo / ma - 1) * 100:+.2f} % vs AIPerf)")
PY
echo "artifacts: $OUT"
