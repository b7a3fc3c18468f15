"""
reduce, naive: one program per row sums it in BLOCK-wide chunks, f32.
"""
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def row_sum(x_ptr, y_ptr, C, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, C, BLOCK):
        c = start + cols
        acc += tl.load(x_ptr + row * C + c, mask=c < C, other=0.0).to(tl.float32)
    tl.store(y_ptr + row, tl.sum(acc, axis=0).to(y_ptr.dtype.element_ty))


def ak_kernel(a):
    x = a.inp[0]
    C = x.shape[-1]
    row_sum[(x.numel() // C,)](x, a.out[0], C, BLOCK=BLOCK)
    return 0
