#!/usr/bin/env python3
"""Record what the tests need from the reference tool's result file.

    scripts/record-reference-fixture.py SEED.txt crates/ldb-core/tests/fixtures

The reference result (shared/seed/000_efdcf0568860807a.txt, kept outside the
repository) is the contract our result files follow. The tests need two
things from it, which this script writes as the project's own data, so that a
clone with nothing beside it runs them:

- reference-key-paths.txt: every leaf's key path of the reference, one per
  line, sorted (array elements as `[]`, numeric map keys as `*`; the same
  rule as `key_paths` in crates/llm-decode-bench/tests/result_file.rs);
- reference-result.json: a small result in the reference's layout: its
  metadata, its typed blocks, its prefill and hardware summary, the first and
  the last of its cells, the first lines of its event log. Its prose (a
  string with a space, or over 64 characters) is replaced by a neutral word:
  the tests read numbers, flags, enum words and key order, never the
  reference tool's sentences.
"""
import json
import os
import sys

PLACEHOLDER = "text"


def strip(v):
    if isinstance(v, dict):
        return {k: strip(x) for k, x in v.items()}
    if isinstance(v, list):
        return [strip(x) for x in v]
    if isinstance(v, str) and (" " in v or "\n" in v or len(v) > 64):
        return PLACEHOLDER
    return v


def paths(v, at, out):
    if isinstance(v, dict):
        for k, x in v.items():
            k = "*" if k.isdigit() else k
            paths(x, f"{at}.{k}" if at else k, out)
    elif isinstance(v, list):
        for x in v:
            paths(x, f"{at}[]", out)
    else:
        out.add(at)


def main() -> int:
    if len(sys.argv) != 3:
        print("usage: scripts/record-reference-fixture.py SEED.txt OUT_DIR", file=sys.stderr)
        return 2
    with open(sys.argv[1], encoding="utf-8") as f:
        seed = json.load(f)
    want = set()
    paths(seed, "", want)
    small = strip(seed)
    small["results"] = [small["results"][0], small["results"][-1]]
    small["event_log"] = small["event_log"][:3]
    out = sys.argv[2]
    with open(os.path.join(out, "reference-key-paths.txt"), "w", encoding="utf-8") as f:
        f.write("".join(p + "\n" for p in sorted(want)))
    with open(os.path.join(out, "reference-result.json"), "w", encoding="utf-8") as f:
        json.dump(small, f, indent=1, ensure_ascii=False)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
