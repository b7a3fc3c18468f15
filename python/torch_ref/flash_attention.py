"""
flash_attention in PyTorch: causal attention, o = softmax(q k^T scale +
causal mask) v, scale the op's scalar[0] (D^-0.5), by
F.scaled_dot_product_attention (torch 2: its flash, memory-efficient or
math kernel, whichever it picks).  SDPA has no out= variant: o is
returned and copied into the harness's output after the timed interval.

torch 1.x has no SDPA: there it is the math as models wrote it then
(transformers' eager attention), q k^T, the mask, softmax in f32, p v,
every intermediate in memory.
"""
import math

import torch
import torch.nn.functional as F

import torch_ref

SDPA = hasattr(F, "scaled_dot_product_attention")
SDPA_SCALE = torch_ref.version() >= (2, 1)     # its scale= argument
masks = {}


def causal_mask(S, device):
    """True above the diagonal, made once per length (a model's buffer)."""
    key = (S, str(device))
    if key not in masks:
        masks[key] = torch.ones(S, S, dtype=torch.bool,
                                device=device).triu(1)
    return masks[key]


def op(inp, scalar):
    q, k, v = inp
    scale = scalar[0]
    if SDPA and SDPA_SCALE:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                              scale=scale)
    if SDPA:
        if abs(scale * math.sqrt(q.shape[-1]) - 1) > 1e-12:
            raise ValueError("torch %s's SDPA scales by D^-0.5 only"
                             % torch.__version__)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    s = torch.matmul(q, k.transpose(-2, -1)) * scale
    s.masked_fill_(causal_mask(q.shape[-2], q.device), float("-inf"))
    p = torch.softmax(s, -1, dtype=torch.float32).to(q.dtype)
    return torch.matmul(p, v)


def ak_kernel(a):
    return op(a.inp, a.scalar)
