"""
fused_mlp: y[T,D] = (silu(x w_gate^T) * (x w_up^T)) w_down^T, with
silu(z) = z / (1 + e^-z); x[T,D], w_gate and w_up [F,D], w_down [D,F].

Two kernels, f32 accumulation in both.  The first computes a BM x BN tile
of the hidden h[T,F] with two tl.dot accumulators over the same slices of
x (the gate's and the up projection's), applies silu(gate) * up, and
stores h in the input dtype in the workspace; the second is y = h
w_down^T, a tiled matmul reading w_down transposed through its strides.
Tiles go in groups of GROUP_M rows of tiles for L2 reuse; masked loads
handle any T, D, F.  f32 is exact f32 math (tl.dot with "ieee") on
smaller tiles.
"""
import torch
import triton
import triton.language as tl

BM = 128  # autokernel: tune 64,128
BN = 128  # autokernel: tune 64,128,256
BK = 64  # autokernel: tune 32,64
GROUP_M = 8  # autokernel: tune 1,4,8,16
WARPS = 8  # autokernel: tune 4,8
STAGES = 3  # autokernel: tune 2,3,4


@triton.jit
def tile_of(pid, M, N, BM: tl.constexpr, BN: tl.constexpr,
            GROUP_M: tl.constexpr):
    tiles_m, tiles_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
    first_m = pid // (GROUP_M * tiles_n) * GROUP_M
    rows_in_group = min(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % (GROUP_M * tiles_n)) % rows_in_group
    pid_n = (pid % (GROUP_M * tiles_n)) // rows_in_group
    return pid_m * BM + tl.arange(0, BM), pid_n * BN + tl.arange(0, BN)


@triton.jit
def gate_up(x_ptr, wg_ptr, wu_ptr, h_ptr, T, F, D, BM: tl.constexpr,
            BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
            PRECISION: tl.constexpr):
    rm, rn = tile_of(tl.program_id(0), T, F, BM, BN, GROUP_M)
    rk = tl.arange(0, BK)
    x_ptrs = x_ptr + rm[:, None].to(tl.int64) * D + rk[None, :]
    # w^T [D,F]: element (k, n) is w[n, k]
    w_off = rn[None, :].to(tl.int64) * D + rk[:, None]
    gate = tl.zeros([BM, BN], tl.float32)
    up = tl.zeros([BM, BN], tl.float32)
    for k in range(0, D, BK):
        x = tl.load(x_ptrs + k, mask=(rm[:, None] < T) & (rk[None, :] < D - k),
                    other=0.0)
        w_mask = (rk[:, None] < D - k) & (rn[None, :] < F)
        wg = tl.load(wg_ptr + w_off + k, mask=w_mask, other=0.0)
        wu = tl.load(wu_ptr + w_off + k, mask=w_mask, other=0.0)
        gate = tl.dot(x, wg, gate, input_precision=PRECISION)
        up = tl.dot(x, wu, up, input_precision=PRECISION)
    h = gate / (1.0 + tl.exp(-gate)) * up
    tl.store(h_ptr + rm[:, None].to(tl.int64) * F + rn[None, :],
             h.to(h_ptr.dtype.element_ty),
             mask=(rm[:, None] < T) & (rn[None, :] < F))


@triton.jit
def down(h_ptr, wd_ptr, y_ptr, T, D, F, BM: tl.constexpr, BN: tl.constexpr,
         BK: tl.constexpr, GROUP_M: tl.constexpr, PRECISION: tl.constexpr):
    rm, rn = tile_of(tl.program_id(0), T, D, BM, BN, GROUP_M)
    rk = tl.arange(0, BK)
    h_ptrs = h_ptr + rm[:, None].to(tl.int64) * F + rk[None, :]
    # w_down^T [F,D]: element (k, n) is w_down[n, k]
    w_ptrs = wd_ptr + rn[None, :].to(tl.int64) * F + rk[:, None]
    acc = tl.zeros([BM, BN], tl.float32)
    for k in range(0, F, BK):
        h = tl.load(h_ptrs + k, mask=(rm[:, None] < T) & (rk[None, :] < F - k),
                    other=0.0)
        w = tl.load(w_ptrs + k, mask=(rk[:, None] < F - k) & (rn[None, :] < D),
                    other=0.0)
        acc = tl.dot(h, w, acc, input_precision=PRECISION)
    tl.store(y_ptr + rm[:, None].to(tl.int64) * D + rn[None, :],
             acc.to(y_ptr.dtype.element_ty),
             mask=(rm[:, None] < T) & (rn[None, :] < D))


def ak_workspace_size(a):
    x, w_gate = a.inp[0], a.inp[1]
    return x.shape[0] * w_gate.shape[0] * x.element_size()


def ak_kernel(a):
    x, wg, wu, wd = a.inp
    y = a.out[0]
    T, D = x.shape
    F = wg.shape[0]
    h = a.workspace.view(x.dtype)
    if x.dtype == torch.float32:
        bm, bn, bk, warps, stages, prec = 64, 64, 32, 4, 2, "ieee"
    else:
        bm, bn, bk, warps, stages, prec = BM, BN, BK, WARPS, STAGES, "tf32"
    grid = (triton.cdiv(T, bm) * triton.cdiv(F, bn),)
    gate_up[grid](x, wg, wu, h, T, F, D, BM=bm, BN=bn, BK=bk,
                  GROUP_M=GROUP_M, PRECISION=prec, num_warps=warps,
                  num_stages=stages)
    grid = (triton.cdiv(T, bm) * triton.cdiv(D, bn),)
    down[grid](h, wd, y, T, D, F, BM=bm, BN=bn, BK=bk, GROUP_M=GROUP_M,
               PRECISION=prec, num_warps=warps, num_stages=stages)
    return 0
