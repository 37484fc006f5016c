#!/usr/bin/env bash
# Record one short streamed exchange per request API (completions, responses, messages) from a
# running server, and how each API's path answers a probe, for the `--api` parsers and discovery.
#
#   scripts/record-api-fixtures.sh BASE_URL OUT_DIR
#
# Files (body in <name>, status line and headers in <name>.headers, request in <name>.request.json):
#   api-completions-stream.sse     POST /v1/completions, prompt text, stream_options.include_usage
#   api-responses-stream.sse       POST /v1/responses, stream: true
#   api-messages-stream.sse        POST /v1/messages, stream: true
#   api-responses-cached.sse       a long prompt sent twice to /v1/responses; the second answer
#   api-messages-cached.sse        the same for /v1/messages (the prefix cache serves the prompt)
#   api-probe-<name>.json          POST {} to each path: the status tells a served API (400/422)
#                                  from one the server lacks (404/405)
set -euo pipefail

base="${1:?base URL}"
out="${2:?output folder}"
mkdir -p "$out"
model="$(curl -fsS "$base/v1/models" | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"][0]["id"])')"

post() { # path file request-body
  printf '%s\n' "$3" >"$out/$2.request.json"
  curl -sS -N -D "$out/$2.headers" -o "$out/$2" -H 'Content-Type: application/json' -d "$3" "$base$1"
}

body() { # api prompt max_tokens
  python3 - "$model" "$1" "$2" "$3" <<'PY'
import json, sys
model, api, prompt, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
b = {"model": model, "temperature": 0, "stream": True}
if api == "completions":
    b.update(prompt=prompt, max_tokens=n, stream_options={"include_usage": True})
elif api == "responses":
    b.update(input=[{"role": "user", "content": prompt}], max_output_tokens=n)
else:
    b.update(messages=[{"role": "user", "content": prompt}], max_tokens=n)
print(json.dumps(b))
PY
}

short="Count from one to ten in words, separated by commas."
# long enough to fill several KV blocks, so the second send finds them cached
long="$(python3 -c 'print(" ".join(f"Item {i} is a small red box on the shelf." for i in range(40)) + " Which item is last?")')"

post /v1/completions api-completions-stream.sse "$(body completions "$short" 16)"
post /v1/responses api-responses-stream.sse "$(body responses "$short" 16)"
post /v1/messages api-messages-stream.sse "$(body messages "$short" 16)"
for api in responses messages; do
  post "/v1/$api" "api-$api-cached-first.sse" "$(body "$api" "$long" 8)"
  post "/v1/$api" "api-$api-cached.sse" "$(body "$api" "$long" 8)"
  rm -f "$out/api-$api-cached-first.sse"*
done
for p in chat/completions completions responses messages; do
  name="api-probe-${p//\//-}.json"
  curl -sS -D "$out/$name.headers" -o "$out/$name" -H 'Content-Type: application/json' -d '{}' "$base/v1/$p" || true
done
curl -sS -D "$out/api-probe-missing.json.headers" -o "$out/api-probe-missing.json" \
  -H 'Content-Type: application/json' -d '{}' "$base/v1/no-such-api" || true
ls -la "$out" >&2
