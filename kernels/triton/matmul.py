"""
matmul: C[M,N] = A[M,K] B[K,N], row-major, f32 accumulation.

A program computes a BM x BN tile of C with tl.dot over BK-wide slices of
K, which Triton pipelines through shared memory in STAGES stages (on
Hopper: TMA loads and wgmma).  Tiles are visited in groups of GROUP_M rows
of tiles, so the blocks in flight share their slices of B in L2.  Masked
loads (zero past the edges) handle any M, N and K.

f16 and bf16 use the tunables below; f32 is exact f32 math (tl.dot with
input_precision "ieee": FMA, not TF32, whose error fails f32's tolerance)
on smaller tiles, whose stages fit in shared memory at 4 bytes a value.
"""
import torch
import triton
import triton.language as tl

BM = 128  # autokernel: tune 64,128,256
BN = 256  # autokernel: tune 64,128,256
BK = 64  # autokernel: tune 32,64,128
GROUP_M = 8  # autokernel: tune 1,4,8,16
WARPS = 8  # autokernel: tune 4,8
STAGES = 3  # autokernel: tune 2,3,4,5


@triton.jit
def matmul_tile(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr,
                BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                PRECISION: tl.constexpr):
    pid = tl.program_id(0)
    tiles_m, tiles_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
    group = pid // (GROUP_M * tiles_n)
    first_m = group * GROUP_M
    rows_in_group = min(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % (GROUP_M * tiles_n)) % rows_in_group
    pid_n = (pid % (GROUP_M * tiles_n)) // rows_in_group

    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None].to(tl.int64) * K + rk[None, :]
    b_ptrs = b_ptr + rk[:, None].to(tl.int64) * N + rn[None, :]
    acc = tl.zeros([BM, BN], tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] < K - k),
                    other=0.0)
        b = tl.load(b_ptrs, mask=(rk[:, None] < K - k) & (rn[None, :] < N),
                    other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_ptrs += BK
        b_ptrs += BK * N
    c_ptrs = c_ptr + rm[:, None].to(tl.int64) * N + rn[None, :]
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def ak_kernel(a):
    A, B = a.inp
    C = a.out[0]
    M, K = A.shape
    N = B.shape[1]
    if A.dtype == torch.float32:
        bm, bn, bk, warps, stages, prec = 64, 64, 32, 4, 3, "ieee"
    else:
        bm, bn, bk, warps, stages, prec = BM, BN, BK, WARPS, STAGES, "tf32"
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    matmul_tile[grid](A, B, C, M, N, K, BM=bm, BN=bn, BK=bk, GROUP_M=GROUP_M,
                      PRECISION=prec, num_warps=warps, num_stages=stages)
    return 0
