"""Check our `assign_req_to_token_pool_cpu` against a literal reading of SGLang's Triton kernel.

Usage: <sglang venv>/bin/python scripts/sglang-cpu-stub/check_stand_in.py

SGLang 0.5.23's `assign_req_to_token_pool` (sglang/srt/mem_cache/allocation.py) runs one program
per request i: it skips the sum of the lengths (end - start) of requests 0..i-1 in out_cache_loc
and copies the next (end[i] - start[i]) entries into req_to_token[req_pool_indices[i],
start[i]:end[i]]. The loop below does that one element at a time; the stand-in must agree with it
on random batches, empty requests included.
"""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sgl_kernel import assign_req_to_token_pool_cpu  # noqa: E402


def one_by_one(req_pool_indices, req_to_token, start, end, out_cache_loc):
    skip = 0
    for i in range(len(req_pool_indices)):
        row = int(req_pool_indices[i])
        for k in range(int(start[i]), int(end[i])):
            req_to_token[row, k] = out_cache_loc[skip + k - int(start[i])]
        skip += int(end[i]) - int(start[i])


def main():
    g = torch.Generator().manual_seed(7)
    rows, cols = 16, 96
    for trial in range(500):
        bs = int(torch.randint(1, 9, (1,), generator=g))
        idx = torch.randperm(rows, generator=g)[:bs]
        start = torch.randint(0, 64, (bs,), generator=g)
        end = start + torch.randint(0, 33, (bs,), generator=g)
        loc = torch.randint(0, 1 << 20, (int((end - start).sum()) + 5,), generator=g)
        want = torch.full((rows, cols), -1, dtype=torch.int32)
        got = want.clone()
        one_by_one(idx, want, start, end, loc)
        # SGLang passes int32/int64 index tensors; use both
        assign_req_to_token_pool_cpu(
            idx.to(torch.int64), got, start.to(torch.int32), end.to(torch.int32), loc, cols
        )
        if not torch.equal(want, got):
            print(f"mismatch in batch {trial}", file=sys.stderr)
            return 1
    print("assign_req_to_token_pool_cpu stand-in agrees with the kernel on 500 random batches")
    return 0


if __name__ == "__main__":
    sys.exit(main())
