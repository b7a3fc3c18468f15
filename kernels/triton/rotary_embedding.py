"""
rotary_embedding: for each row (b, h, s) of x[B,H,S,D] and i < D/2, with
a = x[.., s, 2i] and b = x[.., s, 2i+1]:
    y[.., s, 2i] = a cos[s,i] - b sin[s,i], y[.., s, 2i+1] = a sin[s,i] + b cos[s,i]
in f32, one rounding to the dtype.

A program rotates ROWS consecutive rows: the even and the odd elements of
each as two strided loads (the same cache lines), the row's cos and sin
once each, the two halves stored back interleaved.
"""
import triton
import triton.language as tl

ROWS = 8  # autokernel: tune 1,2,4,8,16,32
WARPS = 4  # autokernel: tune 1,2,4,8


@triton.jit
def rotate(x_ptr, cos_ptr, sin_ptr, y_ptr, n_rows, S, D, HALF_D,
           ROWS: tl.constexpr, HALF: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    i = tl.arange(0, HALF)
    mask = (rows[:, None] < n_rows) & (i[None, :] < HALF_D)
    even = rows[:, None] * D + 2 * i[None, :]
    a = tl.load(x_ptr + even, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(x_ptr + even + 1, mask=mask, other=0.0).to(tl.float32)
    cs = (rows[:, None] % S) * HALF_D + i[None, :]
    c = tl.load(cos_ptr + cs, mask=mask, other=0.0).to(tl.float32)
    s = tl.load(sin_ptr + cs, mask=mask, other=0.0).to(tl.float32)
    ty = y_ptr.dtype.element_ty
    tl.store(y_ptr + even, (a * c - b * s).to(ty), mask=mask)
    tl.store(y_ptr + even + 1, (a * s + b * c).to(ty), mask=mask)


def ak_kernel(a):
    x, cos, sin = a.inp
    y = a.out[0]
    B, H, S, D = x.shape
    n_rows = B * H * S
    if n_rows == 0 or D < 2:
        return 0
    half = max(triton.next_power_of_2(D // 2), 2)
    grid = (triton.cdiv(n_rows, ROWS),)
    rotate[grid](x, cos, sin, y, n_rows, S, D, D // 2, ROWS=ROWS, HALF=half,
                 num_warps=WARPS)
    return 0
