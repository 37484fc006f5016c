"""Record contract fixtures from a running SGLang server (standard library only).

Usage: python3 scripts/record-sglang-fixtures.py BASE_URL OUT_DIR

Each response body goes to its own file, with the status line and headers in <file>.headers and,
for POSTs, the request body in <file>.request.json. The server is expected to have been started
by `scripts/sglang-server.sh start --extra --max-running-requests 2 --max-total-tokens 16384`
and to be idle; crates/ldb-client/tests/fixtures/sglang-0.5.23/README.md lists what is recorded
and why. Steps, in order:

  1. discovery: GET /v1/models, /get_server_info, /server_info, /model_info, /metrics (idle)
  2. POST /tokenize with chat messages and with a plain prompt
  3. streamed chats: include_usage + continuous_usage_stats (English, then Chinese with emoji),
     include_usage only; then /metrics
  4. one long streamed request (ignore_eos, 300 tokens) with /metrics scraped every second while
     it runs and once after it ends: what moves per decode step and what moves at the end
  5. a streamed request aborted through POST /abort_request with the rid taken from its chunks
  6. four concurrent long requests on a server that runs at most two: /metrics while two wait
"""

import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request

BASE = ""
OUT = ""
MODEL = ""


def save(name, status, reason, headers, body, request_body=None):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(body)
    with open(os.path.join(OUT, name + ".headers"), "w", encoding="utf-8") as f:
        f.write(f"HTTP/1.1 {status} {reason}\n")
        for k, v in headers:
            f.write(f"{k}: {v}\n")
    if request_body is not None:
        with open(os.path.join(OUT, name + ".request.json"), "w", encoding="utf-8") as f:
            json.dump(request_body, f, indent=2, ensure_ascii=False)
            f.write("\n")


def call(method, path, body=None, timeout=120):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(BASE + path, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.reason, r.getheaders(), r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.reason, e.headers.items(), e.read()


def get(path, name):
    status, reason, headers, body = call("GET", path)
    save(name, status, reason, headers, body)
    return body


def post(path, name, body):
    status, reason, headers, raw = call("POST", path, body)
    save(name, status, reason, headers, raw, body)
    return raw


def chat_body(prompt, max_tokens, continuous=True, ignore_eos=False):
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if continuous:
        body["stream_options"]["continuous_usage_stats"] = True
    if ignore_eos:
        body["ignore_eos"] = True
    return body


class Stream(threading.Thread):
    """A streamed chat read line by line in the background; keeps the raw bytes."""

    def __init__(self, body):
        super().__init__(daemon=True)
        self.body = body
        self.raw = bytearray()
        self.rid = None
        self.first_chunk = threading.Event()
        self.status = None
        self.reason = ""
        self.headers = []

    def run(self):
        req = urllib.request.Request(
            BASE + "/v1/chat/completions",
            data=json.dumps(self.body).encode(),
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=600) as r:
            self.status, self.reason, self.headers = r.status, r.reason, r.getheaders()
            for line in r:
                self.raw += line
                if self.rid is None and line.startswith(b"data: {"):
                    self.rid = json.loads(line[6:]).get("id")
                    self.first_chunk.set()
        self.first_chunk.set()


def main():
    global BASE, OUT, MODEL
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    BASE, OUT = sys.argv[1].rstrip("/"), sys.argv[2]
    os.makedirs(OUT, exist_ok=True)

    # 1. discovery
    MODEL = json.loads(get("/v1/models", "v1-models.json"))["data"][0]["id"]
    get("/get_server_info", "get-server-info.json")
    get("/server_info", "server-info.json")
    get("/model_info", "model-info.json")
    get("/metrics", "metrics-idle.txt")

    # 2. tokenize
    msgs = [{"role": "user", "content": "Count from one to ten in words, separated by commas."}]
    post("/tokenize", "tokenize-chat.json", {"model": MODEL, "messages": msgs})
    post("/tokenize", "tokenize-prompt.json", {"model": MODEL, "prompt": "Hello world"})

    # 3. streamed chats
    post("/v1/chat/completions", "chat-stream-continuous-usage.sse",
         chat_body(msgs[0]["content"], 32))
    post("/v1/chat/completions", "chat-stream-continuous-usage-zh.sse",
         chat_body("Copy this line exactly, three times: 你好，世界！🙂🎉 我们今天去公园散步吧。😀👍", 48))
    post("/v1/chat/completions", "chat-stream-include-usage.sse",
         chat_body(msgs[0]["content"], 16, continuous=False))
    get("/metrics", "metrics-after-chats.txt")

    # 4. one long request, /metrics every second while it runs
    s = Stream(chat_body("Write a long story about a lighthouse keeper.", 300, ignore_eos=True))
    t0 = time.monotonic()
    s.start()
    s.first_chunk.wait(60)
    times = []
    i = 0
    while s.is_alive() and i < 30:
        time.sleep(1.0)
        if not s.is_alive():
            break
        i += 1
        get("/metrics", f"metrics-long-{i:02d}.txt")
        times.append(round(time.monotonic() - t0, 2))
    s.join()
    times.append(round(time.monotonic() - t0, 2))
    save("chat-stream-long.sse", s.status, s.reason, s.headers, bytes(s.raw), s.body)
    time.sleep(0.5)
    get("/metrics", "metrics-long-after.txt")
    with open(os.path.join(OUT, "metrics-long-times.json"), "w", encoding="utf-8") as f:
        json.dump({"scrape_seconds_after_request_start": times[:-1],
                   "request_end_seconds": times[-1]}, f, indent=2)
        f.write("\n")

    # 5. abort by rid (the chunk id)
    s = Stream(chat_body("Write a long story about a dragon.", 400, ignore_eos=True))
    s.start()
    s.first_chunk.wait(60)
    time.sleep(1.0)
    post("/abort_request", "abort-request.json", {"rid": s.rid})
    s.join(60)
    save("chat-stream-aborted.sse", s.status, s.reason, s.headers, bytes(s.raw), s.body)
    time.sleep(1.0)
    get("/metrics", "metrics-after-abort.txt")

    # 6. over capacity: 4 requests, at most 2 running
    streams = [Stream(chat_body(f"Tell story number {k} about a cat.", 120, ignore_eos=True))
               for k in range(4)]
    for st in streams:
        st.start()
    time.sleep(4.0)
    get("/metrics", "metrics-over-capacity.txt")
    get("/server_info", "server-info-busy.json")
    for st in streams:
        st.join()
    time.sleep(0.5)
    get("/metrics", "metrics-final.txt")
    print(f"recorded into {OUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
