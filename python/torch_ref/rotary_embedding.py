"""
rotary_embedding in PyTorch.  PyTorch has no op for it: this is the
composition a model writes, the rotation in f32 (cos and sin as f32, as
models compute them: f16 or bf16 x is promoted, and y rounded once; a
rounding between the products and the sum errs by more than the op's
tolerance where they cancel).  Each half of y is written by an out=
variant, so neither a torch.cat nor a copy is charged:

    y_a = x_a cos - x_b sin,   y_b = x_a sin + x_b cos

The pairs that rotate together are (x[2i], x[2i+1]) when scalar[0] is 0
(interleaved) and (x[i], x[i+D/2]) when it is 1 (half: rotate_half, as
Llama's); cos and sin are [S, D/2], broadcast over B and H.
"""
import torch

HALF = 1


def pairs(t, layout):
    """The two members of every pair of t's last dimension, as views."""
    if layout == HALF:
        h = t.shape[-1] // 2
        return t[..., :h], t[..., h:]
    return t[..., 0::2], t[..., 1::2]


def op(inp, scalar):
    x, cos, sin = inp
    c, s = cos.float(), sin.float()
    xa, xb = pairs(x, scalar[0])
    ya, yb = xa * c - xb * s, xa * s + xb * c
    if scalar[0] == HALF:
        y = torch.cat((ya, yb), -1)
    else:
        y = torch.stack((ya, yb), -1).flatten(-2)
    return y.to(x.dtype)


def ak_kernel(a):
    x, cos, sin = a.inp
    c, s = cos.float(), sin.float()
    xa, xb = pairs(x, a.scalar[0])
    ya, yb = pairs(a.out[0], a.scalar[0])
    torch.sub(xa * c, xb * s, out=ya)
    torch.add(xa * s, xb * c, out=yb)
