"""
layernorm in PyTorch: y = F.layer_norm(x, (C,), w, b, eps), eps the op's
scalar[0] (1e-5), biased variance, in x's dtype.  F.layer_norm has no
out= variant (aten::native_layer_norm.out is generated: the functional
op, then a copy), so ak_kernel returns y and the runner copies it into
the harness's output after the timed interval.
"""
import torch.nn.functional as F


def op(inp, scalar):
    x, w, b = inp
    return F.layer_norm(x, x.shape[-1:], w, b, scalar[0])


def ak_kernel(a):
    return op(a.inp, a.scalar)
