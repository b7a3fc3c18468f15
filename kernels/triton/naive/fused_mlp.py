"""
fused_mlp, naive: y = (silu(x w_gate^T) * (x w_up^T)) w_down^T in two
kernels, f32 sums of elementwise products (no tl.dot).  The first makes
BLOCK elements of one row of the hidden h[T,F] (in f32, in the
workspace), the second BLOCK elements of one row of y from it.
"""
import torch
import triton
import triton.language as tl

BLOCK = 32
CHUNK = 64


@triton.jit
def hidden(x_ptr, wg_ptr, wu_ptr, h_ptr, F, D, BLOCK: tl.constexpr,
           CHUNK: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    f = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    gate = tl.zeros([BLOCK], tl.float32)
    up = tl.zeros([BLOCK], tl.float32)
    for start in range(0, D, CHUNK):
        d = start + tl.arange(0, CHUNK)
        x = tl.load(x_ptr + t * D + d, mask=d < D, other=0.0).to(tl.float32)
        w = f[:, None].to(tl.int64) * D + d[None, :]
        mask = (f[:, None] < F) & (d[None, :] < D)
        wg = tl.load(wg_ptr + w, mask=mask, other=0.0).to(tl.float32)
        wu = tl.load(wu_ptr + w, mask=mask, other=0.0).to(tl.float32)
        gate += tl.sum(x[None, :] * wg, axis=1)
        up += tl.sum(x[None, :] * wu, axis=1)
    tl.store(h_ptr + t * F + f, gate / (1.0 + tl.exp(-gate)) * up, mask=f < F)


@triton.jit
def output(h_ptr, wd_ptr, y_ptr, F, D, BLOCK: tl.constexpr,
           CHUNK: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    n = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, F, CHUNK):
        f = start + tl.arange(0, CHUNK)
        h = tl.load(h_ptr + t * F + f, mask=f < F, other=0.0)
        w = tl.load(wd_ptr + n[:, None].to(tl.int64) * F + f[None, :],
                    mask=(n[:, None] < D) & (f[None, :] < F), other=0.0)
        acc += tl.sum(h[None, :] * w.to(tl.float32), axis=1)
    tl.store(y_ptr + t * D + n, acc.to(y_ptr.dtype.element_ty), mask=n < D)


def ak_workspace_size(a):
    return 4 * a.inp[0].shape[0] * a.inp[1].shape[0]


def ak_kernel(a):
    x, wg, wu, wd = a.inp
    T, D = x.shape
    F = wg.shape[0]
    h = a.workspace.view(torch.float32)
    hidden[(T, triton.cdiv(F, BLOCK))](x, wg, wu, h, F, D, BLOCK=BLOCK,
                                       CHUNK=CHUNK)
    output[(T, triton.cdiv(D, BLOCK))](h, wd, a.out[0], F, D, BLOCK=BLOCK,
                                       CHUNK=CHUNK)
    return 0
