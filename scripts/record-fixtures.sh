#!/usr/bin/env bash
# Record contract fixtures from a running server into a folder: the responses our client parses
# (discovery, /metrics, /tokenize, streamed chat with continuous usage), each body in its own file
# with the status line and headers next to it in <file>.headers.
#
#   scripts/record-fixtures.sh vllm|llamacpp BASE_URL OUT_DIR [PREFIX]
#
# PREFIX (default empty) is put before every file name, so that one folder can hold the same
# recordings from differently started servers (e.g. "spec-ngram-", "dp2-"); with a PREFIX only
# /metrics and the streamed chats are recorded. The requests, in order:
#   GET  /v1/models, /version (vLLM) or /props (llama.cpp), /metrics       (idle)
#   POST /tokenize                                                          (request body kept)
#   POST /v1/chat/completions, streamed, include_usage + continuous_usage_stats, English prompt
#   POST the same with a prompt the model answers in Chinese with emoji (multi-token characters)
#   GET  /metrics                                                           (after the requests)
set -euo pipefail

engine="${1:?engine: vllm or llamacpp}"
base="${2:?base URL}"
out="${3:?output folder}"
prefix="${4:-}"
mkdir -p "$out"

model="$(curl -fsS "$base/v1/models" | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"][0]["id"])')"

get() { # path file
  curl -sS -D "$out/$2.headers" -o "$out/$2" "$base$1"
}
post() { # path file request-body
  curl -sS -N -D "$out/$2.headers" -o "$out/$2" -H 'Content-Type: application/json' -d "$3" "$base$1"
}

chat() { # file prompt max_tokens
  local body
  body="$(python3 - "$model" "$2" "$3" <<'PY'
import json, sys
model, prompt, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
print(json.dumps({
    "model": model,
    "messages": [{"role": "user", "content": prompt}],
    "max_tokens": n,
    "temperature": 0,
    "stream": True,
    "stream_options": {"include_usage": True, "continuous_usage_stats": True},
}, ensure_ascii=False))
PY
)"
  printf '%s\n' "$body" >"$out/$1.request.json"
  post /v1/chat/completions "$1" "$body"
}

en_prompt="Count from one to ten in words, separated by commas."
zh_prompt="Copy this line exactly, three times: 你好，世界！🙂🎉 我们今天去公园散步吧。😀👍"

if [[ -z "$prefix" ]]; then
  get /v1/models v1-models.json
  case "$engine" in
    vllm) get /version version.json ;;
    llamacpp) get /props props.json ;;
    *) echo "unknown engine $engine" >&2; exit 2 ;;
  esac
  get /metrics metrics-idle.txt
  case "$engine" in
    vllm) tok_req="{\"model\":\"$model\",\"messages\":[{\"role\":\"user\",\"content\":\"$en_prompt\"}]}" ;;
    llamacpp) tok_req="{\"content\":\"$en_prompt\"}" ;;
  esac
  printf '%s\n' "$tok_req" >"$out/tokenize.request.json"
  post /tokenize tokenize.json "$tok_req"
fi
chat "${prefix}chat-stream-continuous-usage.sse" "$en_prompt" 32
chat "${prefix}chat-stream-cjk-emoji.sse" "$zh_prompt" 48
# let the engine publish its counters for the finished requests
sleep 2
get /metrics "${prefix}metrics-after.txt"
ls -la "$out" >&2
