"""A Llama-style decoder from transformers, small and with random weights,
for `git autokernel e2e` on a CUDA GPU.

    git autokernel e2e -- python3 doc/examples/llama.py [--dtype bf16]
        [--batch 2] [--seq 1024] [--layers 2] [--no-labels]

Nothing is downloaded: the config is written here and the weights are
transformers' random initialization, seeded.  It needs transformers (pip
install transformers); the tool itself does not.

Its shapes are those the CUDA starters are verified at by default
(`git autokernel start OP --backend cuda`, no --shape), so exported
kernels of those branches are taken:

  rmsnorm          C = hidden_size 2048 (test shape 1024x2048)
  flash_attention  D = head dim 2048 / 32 = 64 (bench 2x32x1024x64);
                   F.scaled_dot_product_attention, causal, no mask
  fused_mlp        T x D x F = (batch 2 x seq 1024) x 2048 x 5504: the
                   bench shape exactly, as fused_mlp needs
  cross_entropy    V = vocab 32000 (bench 4096x32000), with labels: the
                   loss upcasts the logits to f32, so an f32 kernel; in
                   transformers >= 4.46 the labels are padded with
                   ignore_index, and the loss falls back (e2e says so)

Rotary embeddings are not patched: transformers rotates halves
(rotate_half), the exported op rotates interleaved pairs.  Attention runs
with as many key/value heads as query heads (no GQA), which the op needs.
"""
import argparse

import torch

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}


def parse(args):
    p = argparse.ArgumentParser(prog="llama.py")
    p.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=32,
                   help="attention heads (head dim 2048 / heads)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--no-labels", action="store_true",
                   help="no loss: logits only")
    return p.parse_args(args)


def autokernel_model(args):
    """(model, inputs): a two-layer Llama and a batch of random tokens."""
    from transformers import AutoModelForCausalLM, LlamaConfig

    o = parse(args)
    config = LlamaConfig(
        vocab_size=32000,
        hidden_size=2048,
        intermediate_size=5504,
        num_hidden_layers=o.layers,
        num_attention_heads=o.heads,
        num_key_value_heads=o.heads,
        max_position_embeddings=max(4096, o.seq),
        rms_norm_eps=1e-6,
        hidden_act="silu",
        tie_word_embeddings=False,
        use_cache=False,
    )
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config,
                                             attn_implementation="sdpa")
    model = model.to(device=o.device, dtype=DTYPES[o.dtype]).eval()
    ids = torch.randint(0, config.vocab_size, (o.batch, o.seq),
                        device=o.device)
    inputs = {"input_ids": ids, "use_cache": False}
    if not o.no_labels:
        inputs["labels"] = ids
    return model, inputs
