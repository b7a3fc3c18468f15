"""
softmax, naive: one program per row, three passes over it in BLOCK-wide
chunks: the max, the sum of exponentials, the output.  f32 math.
"""
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def softmax_row(x_ptr, y_ptr, C, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], -float("inf"), tl.float32)
    for start in range(0, C, BLOCK):
        c = start + cols
        x = tl.load(x_ptr + row * C + c, mask=c < C, other=-float("inf"))
        m = tl.maximum(m, x.to(tl.float32))
    row_max = tl.max(m, axis=0)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, C, BLOCK):
        c = start + cols
        x = tl.load(x_ptr + row * C + c, mask=c < C, other=-float("inf"))
        s += tl.exp(x.to(tl.float32) - row_max)
    total = tl.sum(s, axis=0)
    for start in range(0, C, BLOCK):
        c = start + cols
        x = tl.load(x_ptr + row * C + c, mask=c < C, other=0.0)
        y = tl.exp(x.to(tl.float32) - row_max) / total
        tl.store(y_ptr + row * C + c, y.to(y_ptr.dtype.element_ty),
                 mask=c < C)


def ak_kernel(a):
    x, y = a.inp[0], a.out[0]
    C = x.shape[-1]
    R = x.numel() // C
    softmax_row[(R,)](x, y, C, BLOCK=BLOCK)
    return 0
