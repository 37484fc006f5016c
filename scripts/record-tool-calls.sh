#!/usr/bin/env bash
# Record streamed chat exchanges with a forced tool call from a running server, for the
# tool-call parser's fixtures (crates/ldb-client/tests/fixtures/<engine-version>/).
#
#   scripts/record-tool-calls.sh BASE_URL OUT_DIR
#
# The request defines one function (get_weather, one string argument) and forces it with a named
# `tool_choice`: vLLM then constrains the output by guided decoding and llama.cpp (--jinja) by a
# grammar, so the call's JSON is well formed whatever the model's skill. Usage is asked on every
# chunk where the server can give it. Writes tool-call-stream.sse (+ .headers) and the request
# body beside it (tool-call-stream.sse.request.json); then the same with `"tool_choice": "required"`
# (tool-call-required-stream.*), the form llama.cpp constrains by a grammar.
#
# How the servers were started for the fixtures (each under flock /tmp/ldb-engine.lock):
#   scripts/record-tool-calls.sh --vllm OUT_DIR      starts vLLM with the hermes tool-call parser
#   scripts/record-tool-calls.sh --llamacpp OUT_DIR  starts llama-server with --jinja
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

case "${1:-}" in
  --vllm)
    out="${2:?output folder}"
    base="$("$here/vllm-server.sh" start --port 8011 --extra --enable-auto-tool-choice --tool-call-parser hermes | tail -1)"
    trap '"$here/vllm-server.sh" stop --port 8011' EXIT
    "$0" "$base" "$out"
    exit 0 ;;
  --llamacpp)
    out="${2:?output folder}"
    base="$("$here/llama-server.sh" start --port 8012 --slots 1 --extra --jinja | tail -1)"
    trap '"$here/llama-server.sh" stop --port 8012' EXIT
    "$0" "$base" "$out"
    exit 0 ;;
esac

base="${1:?base URL}"
out="${2:?output folder}"
mkdir -p "$out"
model="$(curl -fsS "$base/v1/models" | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"][0]["id"])')"
record() { # file tool_choice-json
  local body
  body="$(python3 - "$model" "$2" <<'PY'
import json, sys
print(json.dumps({
    "model": sys.argv[1],
    "messages": [{"role": "user", "content": "What is the weather in Paris? Use the tool."}],
    "tools": [{"type": "function", "function": {
        "name": "get_weather",
        "description": "Current weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]}}}],
    "tool_choice": json.loads(sys.argv[2]),
    "max_tokens": 48,
    "temperature": 0,
    "stream": True,
    "stream_options": {"include_usage": True, "continuous_usage_stats": True},
}))
PY
)"
  printf '%s\n' "$body" >"$out/$1.sse.request.json"
  curl -sS -N -D "$out/$1.sse.headers" -o "$out/$1.sse" \
    -H 'Content-Type: application/json' -d "$body" "$base/v1/chat/completions"
}
record tool-call-stream '{"type": "function", "function": {"name": "get_weather"}}'
record tool-call-required-stream '"required"'
ls -la "$out" >&2
