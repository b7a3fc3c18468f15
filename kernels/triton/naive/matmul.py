"""
matmul, naive: one program per row of C and BLOCK columns of it; a loop
over K adds a[m,k] times row k of B to an f32 accumulator (no tl.dot).
"""
import triton
import triton.language as tl

BLOCK = 128


@triton.jit
def matmul_row(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK: tl.constexpr):
    m = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for k in range(0, K):
        a = tl.load(a_ptr + m * K + k).to(tl.float32)
        b = tl.load(b_ptr + k * N + cols, mask=cols < N, other=0.0)
        acc += a * b.to(tl.float32)
    tl.store(c_ptr + m * N + cols, acc.to(c_ptr.dtype.element_ty),
             mask=cols < N)


def ak_kernel(a):
    A, B = a.inp
    M, K = A.shape
    N = B.shape[1]
    matmul_row[(M, triton.cdiv(N, BLOCK))](A, B, a.out[0], M, N, K,
                                          BLOCK=BLOCK)
    return 0
