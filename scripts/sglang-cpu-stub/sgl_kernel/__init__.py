"""Stand-in for the CPU build of SGLang's `sgl_kernel`, for tests on machines without it.

SGLang's CPU engine (SGLANG_USE_CPU_ENGINE=1, --device cpu) imports a handful of names from
`sgl_kernel` when its modules load. The CPU build of that package is not published on PyPI, so
scripts/sglang-server.sh puts this directory on the server's PYTHONPATH instead.

Serving a dense model without speculative decoding calls exactly one of those names:
`assign_req_to_token_pool_cpu`, written below with torch indexing. Every other name is only
imported; calling one raises NotImplementedError naming it, so a code path that needs a real
kernel fails loudly instead of computing something wrong.

Our own code; see docs/engines.md ("SGLang") for what it replaces and why.
"""

import torch

__version__ = "0.0.0+ldb-cpu-stand-in"


def assign_req_to_token_pool_cpu(
    req_pool_indices: torch.Tensor,
    req_to_token: torch.Tensor,
    start_offset: torch.Tensor,
    end_offset: torch.Tensor,
    out_cache_loc: torch.Tensor,
    pool_len: int,
) -> None:
    """Record newly allocated KV slots in the request-to-token table, in place.

    The batch's requests are laid end to end in `out_cache_loc`: request i owns the next
    `end_offset[i] - start_offset[i]` entries after those of requests 0..i-1. They are written to
    row `req_pool_indices[i]` of `req_to_token` (rows of `pool_len` columns), at columns
    `start_offset[i]` up to (not including) `end_offset[i]`.
    """
    starts = start_offset.to(torch.int64)
    lengths = end_offset.to(torch.int64) - starts
    if lengths.numel() == 0:
        return
    if bool((lengths < 0).any()) or bool((end_offset.to(torch.int64) > pool_len).any()):
        raise ValueError("assign_req_to_token_pool_cpu: offsets outside the request's row")
    total = int(lengths.sum())
    if total == 0:
        return
    rows = req_pool_indices.to(torch.int64).repeat_interleave(lengths)
    # position of each new token within its own request: 0, 1, ... per request
    first = torch.cumsum(lengths, 0) - lengths
    within = torch.arange(total, dtype=torch.int64) - first.repeat_interleave(lengths)
    cols = starts.repeat_interleave(lengths) + within
    req_to_token[rows, cols] = out_cache_loc[:total].to(req_to_token.dtype)


def _not_provided(name: str):
    def missing(*_args, **_kwargs):
        raise NotImplementedError(
            f"sgl_kernel.{name} is not provided by the llm-decode-bench CPU stand-in "
            "(scripts/sglang-cpu-stub); it is only needed for features the tests do not use"
        )

    missing.__name__ = name
    return missing


# Imported by SGLang 0.5.23's CPU code paths at module load (sglang/kernels/ops/kvcache and
# sglang/kernels/ops/speculative), never called when serving a dense model without speculative
# decoding or hierarchical cache.
for _name in (
    "assign_draft_cache_locs_contiguous_cpu",
    "assign_extend_cache_locs_cpu",
    "build_tree_kernel_efficient_cpu",
    "copy_all_layer_kv_cache_cpu",
    "fill_accept_out_cache_loc_cpu",
    "fill_bonus_tokens_cpu",
    "rotate_input_ids_cpu",
    "verify_tree_greedy_cpu",
):
    globals()[_name] = _not_provided(_name)
del _name
