"""A plain f32 softmax in Triton for the triton backend's integrity tests:
one program per row, three passes over it; each variant in
tests/gpu/t0650-triton.sh breaks it one way (HOST_BREAK, DEVICE_BREAK)."""
import torch
import triton
import triton.language as tl

BLOCK = 1024  # autokernel: tune 256,512,1024,2048


@triton.jit
def softmax_rows(x_ptr, y_ptr, C, BLOCK: tl.constexpr):
    r = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], -float("inf"), tl.float32)
    for start in range(0, C, BLOCK):
        c = start + cols
        m = tl.maximum(m, tl.load(x_ptr + r * C + c, mask=c < C,
                                  other=-float("inf")))
    mx = tl.max(m, axis=0)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, C, BLOCK):
        c = start + cols
        s += tl.exp(tl.load(x_ptr + r * C + c, mask=c < C,
                            other=-float("inf")) - mx)
    total = tl.sum(s, axis=0)
    for start in range(0, C, BLOCK):
        c = start + cols
        x = tl.load(x_ptr + r * C + c, mask=c < C, other=0.0)
        tl.store(y_ptr + r * C + c, tl.exp(x - mx) / total, mask=c < C)
    # DEVICE_BREAK


def ak_kernel(a):
    x, y = a.inp[0], a.out[0]
    rows, cols = x.shape
    # HOST_BREAK
    softmax_rows[(rows,)](x, y, cols, BLOCK=BLOCK)
    return 0
