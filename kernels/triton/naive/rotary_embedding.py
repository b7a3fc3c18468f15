"""
rotary_embedding, naive: one program per row (b, h, s) rotates its D/2
pairs (x[2i], x[2i+1]) by (cos[s,i], sin[s,i]) in f32.
"""
import triton
import triton.language as tl


@triton.jit
def rotate_row(x_ptr, cos_ptr, sin_ptr, y_ptr, S, D, HALF: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    i = tl.arange(0, HALF)
    mask = i < D // 2
    a = tl.load(x_ptr + row * D + 2 * i, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(x_ptr + row * D + 2 * i + 1, mask=mask, other=0.0).to(tl.float32)
    c = tl.load(cos_ptr + (row % S) * (D // 2) + i, mask=mask, other=0.0).to(tl.float32)
    s = tl.load(sin_ptr + (row % S) * (D // 2) + i, mask=mask, other=0.0).to(tl.float32)
    ty = y_ptr.dtype.element_ty
    tl.store(y_ptr + row * D + 2 * i, (a * c - b * s).to(ty), mask=mask)
    tl.store(y_ptr + row * D + 2 * i + 1, (a * s + b * c).to(ty), mask=mask)


def ak_kernel(a):
    x, cos, sin = a.inp
    B, H, S, D = x.shape
    half = max(triton.next_power_of_2(D // 2), 2)
    rotate_row[(B * H * S,)](x, cos, sin, a.out[0], S, D, HALF=half)
    return 0
