"""
rmsnorm in PyTorch: y = x / sqrt(mean(x^2) + eps) * w, eps the op's
scalar[0] (1e-6), in x's dtype.  F.rms_norm where torch has it (2.4 and
later), else the formula as transformers' LlamaRMSNorm writes it (f32
inside, rounded to x's dtype before the weight).  Neither has an out=
variant: y is returned and copied after the timed interval.
"""
import torch
import torch.nn.functional as F


def op(inp, scalar):
    x, w = inp
    if hasattr(F, "rms_norm"):
        return F.rms_norm(x, x.shape[-1:], w, scalar[0])
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + scalar[0])
    return w * h.to(x.dtype)


def ak_kernel(a):
    return op(a.inp, a.scalar)
