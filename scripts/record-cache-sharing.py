"""Record which tokens of a finished request the next request reuses (standard library only).

Usage: python3 scripts/record-cache-sharing.py BASE_URL vllm|sglang OUT.json

Issue 35: the intended prefix-cache hit rate of sessions and trace replays must follow what real
engines cache, not what our simulator assumes. Each case sends single requests, one at a time,
built so that each hypothesis predicts a different number of cached tokens, and reads the
server's own count (the delta of `vllm:prefix_cache_hits_total`, or SGLang's prompt tokens less
its uncached ones, and `usage.prompt_tokens_details.cached_tokens` when the server reports it).
Every text is fresh (random words), so no reset is needed. Cases:

  head     two 100-word user messages that differ at their first word: the second shares
           the chat template's opening (default system prompt, user turn header) only
  reply    a first turn of P tokens generating G = 2 x block - P tokens (ignore_eos,
           temperature 0), then the conversation's next turn: prompt only (P), prompt and
           reply but its last token (P + G - 1), or all of it (P + G), at block granularity,
           differ here
  reply_eos  the same with the model free to stop (EOS respected)
  reply_sampled  as the benchmark's sessions send it: a user message of random words, the
           server's default temperature, ignore_eos; the model may emit a special token past
           its end of turn (hidden from the text) or a token run that the reply's text is not
           tokenized back into, and the next turn then repeats the reply only up to there
           (`next_repeats_sequence`, from the generated ids vLLM returns)

The output is one JSON file stamped with the engine, its version, the model and the block (page)
size; crates/ldb-client/tests/fixtures/cache-sharing/README.md says how the servers were started.
"""

import json
import random
import sys
import time
import urllib.request

WORDS = (
    " the and for are but not you all any can had her was one our out day get has him his how"
    " man new now old see two way who did its let put say she too use act add age ago air arm"
    " art ask bad bag bar bed big bit box bus buy car cat cup cut dog dry due ear eat egg end eye"
    " far few fit fly fun gas hat hit hot ice job key kid law lay leg lie lot low map mix net nor"
    " oil pay pen per pet pot ran raw red row run sad sat sea set sit six sky son sun tax tea ten"
    " tie tip top toy try van war web wet win yes yet sum tin fan"
).split()


def call(base, method, path, body=None, timeout=600):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=timeout) as r:
        raw = r.read().decode()
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def metric_sum(text, name, label=None):
    total, seen = 0.0, False
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        head, _, value = line.rpartition(" ")
        metric = head.split("{")[0]
        if metric != name or (label and label not in head):
            continue
        total += float(value)
        seen = True
    return total if seen else None


class Server:
    def __init__(self, base, engine):
        self.base, self.engine = base.rstrip("/"), engine
        self.model = call(self.base, "GET", "/v1/models")["data"][0]["id"]
        if engine == "vllm":
            self.version = call(self.base, "GET", "/version")["version"]
            m = call(self.base, "GET", "/metrics")
            line = next(x for x in m.splitlines() if x.startswith("vllm:cache_config_info"))
            self.block = int(line.split('block_size="')[1].split('"')[0])
        else:
            info = call(self.base, "GET", "/server_info")
            self.version = info.get("version", "")
            self.block = int(info.get("page_size") or 1)

    def cached_counter(self):
        """(prompt tokens, cached tokens) counted by the server so far."""
        m = call(self.base, "GET", "/metrics")
        if self.engine == "vllm":
            return (
                metric_sum(m, "vllm:prefix_cache_queries_total") or 0.0,
                metric_sum(m, "vllm:prefix_cache_hits_total") or 0.0,
            )
        prompt = metric_sum(m, "sglang:prompt_tokens_total") or 0.0
        uncached = metric_sum(m, "sglang:uncached_prompt_tokens_histogram_sum")
        cached = metric_sum(m, "sglang:cached_tokens_total")
        if uncached is not None:
            return prompt, prompt - uncached
        return prompt, cached or 0.0

    def tokenize(self, messages):
        v = call(self.base, "POST", "/tokenize", {"model": self.model, "messages": messages})
        return v["tokens"]

    def chat(self, messages, max_tokens, ignore_eos, greedy=True):
        body = {
            "model": self.model,
            "messages": messages,
            "max_tokens": max_tokens,
            "ignore_eos": ignore_eos,
        }
        if greedy:
            body["temperature"] = 0
        if self.engine == "vllm":
            body["return_token_ids"] = True
        before = self.cached_counter()
        v = call(self.base, "POST", "/v1/chat/completions", body)
        time.sleep(1.0)
        after = self.cached_counter()
        for _ in range(20):  # counters may land a moment after the reply
            if after[0] - before[0] >= v["usage"]["prompt_tokens"]:
                break
            time.sleep(0.5)
            after = self.cached_counter()
        usage = v["usage"]
        details = usage.get("prompt_tokens_details") or {}
        choice = v["choices"][0]
        return {
            "content": choice["message"]["content"] or "",
            "generated_ids": choice.get("token_ids"),
            "finish_reason": choice.get("finish_reason"),
            "prompt_tokens": usage["prompt_tokens"],
            "completion_tokens": usage["completion_tokens"],
            "cached_usage": details.get("cached_tokens"),
            "cached_metrics": round(after[1] - before[1]),
        }


def words(rng, n):
    return "".join(" " + rng.choice(WORDS) for _ in range(n)).strip()


def common(a, b):
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def unit(block, shared, prompt):
    """Whole blocks of `shared`, never the prompt's last token."""
    return min(shared, prompt - 1) // block * block


def head_case(s, rng):
    first = words(rng, 100)
    a = [{"role": "user", "content": "alpha " + first}]
    b = [{"role": "user", "content": "omega " + words(rng, 100)}]
    ids_a, ids_b = s.tokenize(a), s.tokenize(b)
    s.chat(a, 1, True)
    r = s.chat(b, 1, True)
    head = common(ids_a, ids_b)
    return {
        "case": "head",
        "prompt_tokens": r["prompt_tokens"],
        "template_head_tokens": head,
        "cached_metrics": r["cached_metrics"],
        "cached_usage": r["cached_usage"],
        "predicted": {
            "unique": 0,
            "head_shared": unit(s.block, head, r["prompt_tokens"]),
        },
    }


def reply_case(s, rng, ignore_eos, sampled=False):
    opening = "" if sampled else "Tell me a story about "
    user = [{"role": "user", "content": opening + words(rng, 60)}]
    p = len(s.tokenize(user))
    block = max(s.block, 128)
    g = 2 * block - p
    first = s.chat(user, g, ignore_eos, greedy=not sampled)
    conv = user + [
        {"role": "assistant", "content": first["content"]},
        {"role": "user", "content": "And then " + words(rng, 40)},
    ]
    ids_prev = s.tokenize(user)
    ids_next = s.tokenize(conv)
    second = s.chat(conv, 1, True)
    gen = first["completion_tokens"]
    pn = second["prompt_tokens"]
    out = {
        "case": "reply_sampled" if sampled else "reply" if ignore_eos else "reply_eos",
        "prompt_tokens": first["prompt_tokens"],
        "generated_tokens": gen,
        "finish_reason": first["finish_reason"],
        "next_prompt_tokens": pn,
        "next_repeats_prompt": common(ids_prev, ids_next),
        "cached_metrics": second["cached_metrics"],
        "cached_usage": second["cached_usage"],
        "predicted": {
            "prompt_only": unit(s.block, p, pn),
            "prompt_and_reply_but_last": unit(s.block, p + gen - 1, pn),
            "prompt_and_reply": unit(s.block, p + gen, pn),
        },
    }
    if first["generated_ids"] is not None:
        # how far the next prompt repeats what the engine generated
        seq = ids_prev + list(first["generated_ids"])
        out["next_repeats_sequence"] = common(seq, ids_next)
        out["predicted"]["repeated_sequence_but_last"] = unit(
            s.block, min(out["next_repeats_sequence"], p + gen - 1), pn
        )
    return out


def main():
    base, engine, out = sys.argv[1], sys.argv[2], sys.argv[3]
    s = Server(base, engine)
    rng = random.Random(int(time.time()))
    cases = []
    for _ in range(2):
        cases.append(head_case(s, rng))
        cases.append(reply_case(s, rng, True))
        cases.append(reply_case(s, rng, False))
    for _ in range(4):
        cases.append(reply_case(s, rng, True, sampled=True))
    doc = {
        "engine": engine,
        "version": s.version,
        "model": s.model,
        "block_tokens": s.block,
        "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "recorded_by": "python3 scripts/record-cache-sharing.py BASE_URL " + engine + " OUT.json",
        "cases": cases,
    }
    with open(out, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    for c in cases:
        print(json.dumps(c))


if __name__ == "__main__":
    main()
