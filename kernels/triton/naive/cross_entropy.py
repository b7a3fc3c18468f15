"""
cross_entropy, naive: one program per row, two passes over its logits
(the max, then the sum of exponentials), its loss into the workspace;
then one program sums the losses in order and divides.  f32 math.
"""
import torch
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def row_loss(x_ptr, t_ptr, loss_ptr, V, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], -float("inf"), tl.float32)
    for start in range(0, V, BLOCK):
        c = start + cols
        x = tl.load(x_ptr + row * V + c, mask=c < V, other=-float("inf"))
        m = tl.maximum(m, x.to(tl.float32))
    row_max = tl.max(m, axis=0)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, V, BLOCK):
        c = start + cols
        x = tl.load(x_ptr + row * V + c, mask=c < V, other=-float("inf"))
        s += tl.exp(x.to(tl.float32) - row_max)
    lse = row_max + tl.log(tl.sum(s, axis=0))
    target = tl.load(t_ptr + row).to(tl.int64)
    tl.store(loss_ptr + row, lse - tl.load(x_ptr + row * V + target).to(tl.float32))


@triton.jit
def mean_loss(loss_ptr, out_ptr, N, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, N, BLOCK):
        acc += tl.load(loss_ptr + start + cols, mask=start + cols < N, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0) / N)


def ak_workspace_size(a):
    return 4 * a.inp[0].shape[0]


def ak_kernel(a):
    logits, target = a.inp
    N, V = logits.shape
    losses = a.workspace.view(torch.float32)
    row_loss[(N,)](logits, target, losses, V, BLOCK=BLOCK)
    mean_loss[(1,)](losses, a.out[0], N, BLOCK=BLOCK)
    return 0
