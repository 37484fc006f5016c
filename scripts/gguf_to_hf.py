"""Turn a GGUF model file into a Hugging Face model folder that vLLM can load.

Usage: python gguf_to_hf.py MODEL.gguf OUT_DIR

Used by scripts/vllm-server.sh (`model` step) for SmolLM2-135M-Instruct. transformers (with the
`gguf` package) reads and dequantizes the GGUF; it will not `save_pretrained` a model loaded that
way, so the weights go out through safetensors and the config is written from the loaded one,
naming the architecture class vLLM looks up. The tokenizer saves the ordinary way.
"""

import json
import os
import sys


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    gguf_path, out = sys.argv[1], sys.argv[2]
    folder, name = os.path.split(os.path.abspath(gguf_path))

    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    cfg = model.config
    if cfg.model_type != "llama":
        print(f"expected a llama model, got {cfg.model_type}", file=sys.stderr)
        return 1

    os.makedirs(out, exist_ok=True)
    tok.save_pretrained(out)

    state = model.state_dict()
    tied = bool(getattr(cfg, "tie_word_embeddings", False))
    if tied:
        # the output layer shares the embedding matrix; safetensors stores one copy
        state.pop("lm_head.weight", None)
    tensors = {k: v.detach().to(torch.float32).contiguous() for k, v in state.items()}
    save_file(tensors, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})

    conf = cfg.to_dict()
    for key in ("quantization_config", "_name_or_path", "transformers_version"):
        conf.pop(key, None)
    conf["architectures"] = ["LlamaForCausalLM"]
    conf["model_type"] = "llama"
    conf["tie_word_embeddings"] = tied
    conf["torch_dtype"] = "float32"
    conf.pop("dtype", None)
    with open(os.path.join(out, "config.json"), "w", encoding="utf-8") as f:
        json.dump(conf, f, indent=2, sort_keys=True)
        f.write("\n")

    gen = model.generation_config.to_dict() if model.generation_config is not None else {}
    gen = {k: v for k, v in gen.items() if k in ("bos_token_id", "eos_token_id", "pad_token_id")}
    with open(os.path.join(out, "generation_config.json"), "w", encoding="utf-8") as f:
        json.dump(gen, f, indent=2, sort_keys=True)
        f.write("\n")

    n = sum(t.numel() for t in tensors.values())
    print(f"wrote {out}: {len(tensors)} tensors, {n:,} parameters, tied embeddings: {tied}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
