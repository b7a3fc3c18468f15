/*
 * fused_mlp (SwiGLU): y[T,D] = (silu(x w_gate^T) * (x w_up^T)) w_down^T,
 * silu(z) = z / (1 + e^-z), f32 accumulation.
 *
 * The first GEMM's tile width is chosen per shape to cut wave
 * quantization: at 2048x2048x5504 the gate/up GEMM has 16 x 43 = 688 tiles
 * of 128 x (2 x 128) for 132 SMs, one block per SM: 6 waves, the last 21%
 * full.  With 136-column tiles (m64n136k16, 136 accumulators per thread) it
 * is 16 x 41 = 656 tiles, 5 waves of 6% longer tiles.  The launch minimizes
 * waves x width over 128, 136, 144, 160 and 88 (the SM count from the device);
 * B boxes of such tiles are one BN-row TMA box per product; the staging
 * pitch keeps the fragment stores conflict-free.  The down projection (128
 * tiles of 128 x 256 at 2048 tokens, one wave) is unchanged there; at 512
 * tokens it has 4 x 8 = 32 tiles, a quarter of the SMs, so it splits K
 * into up to SPLITK parts (pick_parts), each part's f32 sums to the
 * workspace and one more kernel adding them in order.  The split is a
 * kernel instance of its own (SPLIT), so the unsplit shapes run the code
 * they ran before it.  Judged by the hook on an H100 (f16): 512x2048x5504
 * 116.3 -> 93.6 us; 2048x2048x5504 and 4096x4096x14336 even.  With PDL,
 * the kernels after the first are programmatic dependent launches: each
 * may be scheduled once every block of the one before it has started
 * (its last wave), taking SMs as that one's blocks leave them, and waits
 * for its end before touching memory, so the launch gaps of the call are
 * hidden (judged by the hook on an H100, f16, session 21: 512x2048x5504
 * 84.86 -> 80.61 us, 2048x2048x5504 215.26 -> 212.74, 4096x4096x14336
 * 1954.11 -> 1948.64).  Measured on
 * an H200 at 2048x2048x5504 f16 (doc/results/h200/fused_mlp.md): mma.sync
 * 578 us, wgmma 358, the fitted width 325, and without clusters see below.
 *
 * Two launches of one "NT" GEMM (C[M,N] = A[M,K] B[N,K]^T, both row-major,
 * so both operands are K-major):
 *   1. h[T,F] = silu(x w_gate^T) * (x w_up^T): one block computes a 128 x 128
 *      tile of the gate and of the up product together (two accumulators that
 *      share each x tile), and applies the SiLU product to the f32
 *      accumulators in the epilogue.  h goes to the workspace in the input
 *      dtype: one rounding of the intermediate, as doc/ops.md allows.
 *   2. y[T,D] = h w_down^T, 128 x BN2 tiles.
 * f16/bf16 on Hopper (sm_90a): a warp-specialized wgmma kernel.
 *   - 3 warpgroups per block.  Warpgroup 0 is the producer: one thread
 *     issues TMA copies (cp.async.bulk.tensor, 128-byte swizzle, zero fill
 *     outside the tensors) of the A tile (128 x 64) and the B tiles (64-deep
 *     boxes of 128 rows) into a STAGES-deep ring of shared-memory stages,
 *     each completing on a "full" mbarrier.
 *   - Warpgroups 1 and 2 consume: each owns 64 rows and issues
 *     wgmma.mma_async m64nNk16 from shared-memory descriptors, accumulators
 *     in registers (128 per thread: 2 x 64 for gate/up, or 128 for y),
 *     keeps one wgmma group in flight and frees each stage (an arrive on its
 *     "empty" mbarrier) once the group that read it retired.  setmaxnreg:
 *     232 registers for consumers, 40 for the producer.
 *   - CLUSTER 2 would pair the blocks of two vertically adjacent tiles:
 *     they share the B tiles, each loads half and multicasts it to both;
 *     but then a stage is free only when both blocks released it, and on
 *     the H200 that coupling cost more than the L2 traffic it saves (matmul
 *     2048^3: 42.8 us with pairs, 28.0 without).  CLUSTER 1 is the default.
 *   - Epilogue: f32 -> (silu * up) -> input dtype -> padded shared-memory
 *     tile -> 16-byte coalesced stores inside C.
 * TMA and the 16-byte epilogue need K % 8 == 0 and N % 8 == 0 for that GEMM;
 * otherwise it runs on an mma.sync m16n8k16 kernel: 8 warps on a 128 x 128
 * tile (of each product), ldmatrix from rows padded by 8 elements, a 2-stage
 * cp.async pipeline, element-wise fills where 16-byte copies don't fit.
 * f32: a plain 64 x 64 shared-memory tiled SIMT kernel, exact f32 FFMA.
 */
#include <cuda_runtime.h>
#include <cudaTypedefs.h>       /* CUtensorMap and the encoder's type; no libcuda link */
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>
#include <algorithm>
#include <type_traits>
#include "autokernel.h"

/*
 * Tunables.  WGMMA 1 selects the Hopper kernel below for f16/bf16 on
 * compute capability 9.0 (elsewhere the mma.sync kernel runs); 0 keeps
 * both GEMMs on the mma.sync kernel.  BN1_FIT 1 picks the first GEMM's tile width per shape
 * (see the top comment); 0 keeps BN1; 88, 136, 144 or 160 forces that width on
 * every shape, which is how the five stages reach the wider kernels (their
 * test shapes are one wave, where the fit picks 88, or 128 at 8x64x12288).
 */
#define WGMMA 1     /* autokernel: tune 0,1 */
#define STAGES 4    /* autokernel: tune 3,4 */
#define CLUSTER 1   /* autokernel: tune 1,2 */
#define BN1_FIT 1   /* autokernel: tune 0,1,88,136 */
#define SPLITK 4    /* autokernel: tune 1,2,4 */
#define PDL 1       /* autokernel: tune 0,1 */

#define BN2 256                         /* y tile columns (one m64n256k16 per k16) */
#define BM 128                          /* two consumer warpgroups x 64 rows */
#define BN1 128                         /* gate and up tiles of the first GEMM (BN1_FIT 0) */
#define BK 64                           /* one 128-byte swizzle row of 16-bit elements */
#define A_BYTES (BM * BK * 2)           /* 16 KB */
#define BOX_ROWS 128                    /* B boxes: 128 rows x 128 bytes */
#define WG_SMEM(NB, BN) (STAGES * (A_BYTES + (NB) * (BN) * BK * 2) + 1024 + 16 * STAGES)

/* mma.sync path (K or N not a multiple of 8, or WGMMA 0) */
#define FBM 128
#define FBN 128
#define FBK 64
#define FSTAGES 2

/* ---- shared: helpers (kept equal in matmul.cu, fused_mlp.cu; tests/t0023-kernel-twins.sh) ---- */
template <typename T> static __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ __half from_f32<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

static __device__ __forceinline__ uint32_t smem_u32(const void *p)
{
	return (uint32_t)__cvta_generic_to_shared(p);
}
/* ---- end shared: helpers ---- */

static __device__ __forceinline__ float silu_mul(float g, float u)
{
	return g / (1.f + expf(-g)) * u;
}

#if WGMMA

/* ---- shared: mbarrier-tma-wgmma (kept equal in matmul.cu, fused_mlp.cu, flash_attention.cu; tests/t0023-kernel-twins.sh) ---- */
/* ---- mbarriers, TMA, clusters ------------------------------------------ */

static __device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count)
{
	asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(count));
}

static __device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes)
{
	asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
		     :: "r"(bar), "r"(bytes) : "memory");
}

static __device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity)
{
	uint32_t done;

	do
		asm volatile("{\n.reg .pred p;\n"
			     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
			     "selp.u32 %0, 1, 0, p;\n}\n"
			     : "=r"(done) : "r"(bar), "r"(parity) : "memory");
	while (!done);
}

/* Arrive on the barrier at the same offset in cluster block `rank`. */
[[maybe_unused]] static __device__ __forceinline__ void mbar_arrive_cluster(uint32_t bar, uint32_t rank)
{
	asm volatile("{\n.reg .b32 r;\nmapa.shared::cluster.u32 r, %0, %1;\n"
		     "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [r];\n}\n"
		     :: "r"(bar), "r"(rank) : "memory");
}

static __device__ __forceinline__ void mbar_arrive(uint32_t bar)
{
	asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar) : "memory");
}

[[maybe_unused]] static __device__ __forceinline__ uint32_t cluster_rank(void)
{
	uint32_t r;
	asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
	return r;
}

[[maybe_unused]] static __device__ __forceinline__ void cluster_sync(void)
{
	asm volatile("barrier.cluster.arrive.release.aligned;\n"
		     "barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

/* 2-D tile at (c0 = inner, c1 = outer) into shared memory; completes on bar. */
[[maybe_unused]] static __device__ __forceinline__ void tma_load(uint32_t dst, const CUtensorMap *map,
						uint32_t bar, int c0, int c1)
{
	asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
		     " [%0], [%1, {%3, %4}], [%2];"
		     :: "r"(dst), "l"((uint64_t)map), "r"(bar), "r"(c0), "r"(c1) : "memory");
}

/* The same, written to the same offset in every block of `mask`. */
[[maybe_unused]] static __device__ __forceinline__ void tma_load_mc(uint32_t dst, const CUtensorMap *map,
						   uint32_t bar, int c0, int c1, uint16_t mask)
{
	asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
		     ".multicast::cluster [%0], [%1, {%3, %4}], [%2], %5;"
		     :: "r"(dst), "l"((uint64_t)map), "r"(bar), "r"(c0), "r"(c1), "h"(mask)
		     : "memory");
}

/* ---- wgmma -------------------------------------------------------------- */

/* Shared-memory matrix descriptor, 128-byte swizzle; offsets in bytes. */
static __device__ __forceinline__ uint64_t sw128_desc(uint32_t addr, uint32_t lbo, uint32_t sbo)
{
	return (uint64_t)((addr & 0x3FFFF) >> 4) |
	       (uint64_t)((lbo & 0x3FFFF) >> 4) << 16 |
	       (uint64_t)((sbo & 0x3FFFF) >> 4) << 32 |
	       1ull << 62;
}

static __device__ __forceinline__ void wgmma_fence(void)
{
	asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}

static __device__ __forceinline__ void wgmma_commit(void)
{
	asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

template <int N>
static __device__ __forceinline__ void wgmma_wait(void)
{
	asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory");
}

template <int R>
static __device__ __forceinline__ void setmaxnreg_inc(void)
{
	asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" :: "n"(R));
}

template <int R>
static __device__ __forceinline__ void setmaxnreg_dec(void)
{
	asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" :: "n"(R));
}

[[maybe_unused]] static __device__ __forceinline__ void named_bar(int id, int count)
{
	asm volatile("bar.sync %0, %1;" :: "r"(id), "r"(count) : "memory");
}

/* Arrive at named barrier id (count threads in all) without waiting. */
[[maybe_unused]] static __device__ __forceinline__ void named_arrive(int id, int count)
{
	asm volatile("bar.arrive %0, %1;" :: "r"(id), "r"(count) : "memory");
}
/* ---- end shared: mbarrier-tma-wgmma ---- */

/* The wgmma instructions as inline asm, the dtype (TY: "f16" or "bf16")
 * their one difference between the two forms each is used in. */
/* ---- shared: wgmma-n128 (kept equal in matmul.cu, fused_mlp.cu, flash_attention.cu; tests/t0023-kernel-twins.sh) ---- */
/* d[0..63] (+)= A B, m64n128k16: SD 0 overwrites d; TB 1: B is N-major. */
#define WGMMA_N128(TY, SD) \
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n" \
		  "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " " \
		  "{" "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
		  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
		  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
		  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63" "}, " \
		  "%64, %65, p, 1, 1, 0, %67;\n}\n" \
		  : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
		  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
		  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
		  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
		  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
		  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
		  "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
		  "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]) \
		  : "l"(da), "l"(db), "r"(SD), "n"(TB))
/* ---- end shared: wgmma-n128 ---- */

#define WGMMA_N88(TY) \
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %46, 0;\n" \
		  "wgmma.mma_async.sync.aligned.m64n88k16.f32." TY "." TY " " \
		  "{" "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
		  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
		  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43" "}, " \
		  "%44, %45, p, 1, 1, 0, %47;\n}\n" \
		  : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
		  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
		  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
		  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
		  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
		  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]) \
		  : "l"(da), "l"(db), "r"(1), "n"(TB))

#define WGMMA_N136(TY) \
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %70, 0;\n" \
		  "wgmma.mma_async.sync.aligned.m64n136k16.f32." TY "." TY " " \
		  "{" "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
		  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
		  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
		  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
		  "%64, %65, %66, %67" "}, " \
		  "%68, %69, p, 1, 1, 0, %71;\n}\n" \
		  : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
		  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
		  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
		  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
		  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
		  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
		  "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
		  "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), \
		  "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]) \
		  : "l"(da), "l"(db), "r"(1), "n"(TB))

#define WGMMA_N144(TY) \
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %74, 0;\n" \
		  "wgmma.mma_async.sync.aligned.m64n144k16.f32." TY "." TY " " \
		  "{" "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
		  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
		  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
		  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
		  "%64, %65, %66, %67, %68, %69, %70, %71" "}, " \
		  "%72, %73, p, 1, 1, 0, %75;\n}\n" \
		  : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
		  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
		  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
		  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
		  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
		  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
		  "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
		  "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), \
		  "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]) \
		  : "l"(da), "l"(db), "r"(1), "n"(TB))

#define WGMMA_N160(TY) \
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %82, 0;\n" \
		  "wgmma.mma_async.sync.aligned.m64n160k16.f32." TY "." TY " " \
		  "{" "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
		  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
		  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
		  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
		  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79" "}, " \
		  "%80, %81, p, 1, 1, 0, %83;\n}\n" \
		  : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
		  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
		  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
		  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
		  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
		  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
		  "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
		  "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), \
		  "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
		  "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]) \
		  : "l"(da), "l"(db), "r"(1), "n"(TB))

/* ---- shared: wgmma-n256 (kept equal in matmul.cu, fused_mlp.cu; tests/t0023-kernel-twins.sh) ---- */
#define WGMMA_N256(TY) \
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n" \
		  "wgmma.mma_async.sync.aligned.m64n256k16.f32." TY "." TY " " \
		  "{" "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
		  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
		  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
		  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
		  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
		  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
		  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
		  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127" "}, " \
		  "%128, %129, p, 1, 1, 0, %131;\n}\n" \
		  : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
		  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
		  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
		  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
		  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
		  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
		  "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
		  "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), \
		  "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
		  "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
		  "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
		  "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), \
		  "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), \
		  "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
		  "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), \
		  "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127]) \
		  : "l"(da), "l"(db), "r"(1), "n"(TB))
/* ---- end shared: wgmma-n256 ---- */

/* d[0..N/2-1] += A B, m64nNk16; TB: B is N-major (transposed).  N is one of
 * the tile widths the kernels use (an inline asm needs its operands spelled out). */
template <typename T, int N, int TB>
static __device__ __forceinline__ void wgmma_n(float *d, uint64_t da, uint64_t db)
{
	if constexpr (N == 88) {
		if constexpr (std::is_same_v<T, __half>)
			WGMMA_N88("f16");
		else
			WGMMA_N88("bf16");
	} else if constexpr (N == 128) {
		if constexpr (std::is_same_v<T, __half>)
			WGMMA_N128("f16", 1);
		else
			WGMMA_N128("bf16", 1);
	} else if constexpr (N == 136) {
		if constexpr (std::is_same_v<T, __half>)
			WGMMA_N136("f16");
		else
			WGMMA_N136("bf16");
	} else if constexpr (N == 144) {
		if constexpr (std::is_same_v<T, __half>)
			WGMMA_N144("f16");
		else
			WGMMA_N144("bf16");
	} else if constexpr (N == 160) {
		if constexpr (std::is_same_v<T, __half>)
			WGMMA_N160("f16");
		else
			WGMMA_N160("bf16");
	} else if constexpr (N == 256) {
		if constexpr (std::is_same_v<T, __half>)
			WGMMA_N256("f16");
		else
			WGMMA_N256("bf16");
	} else {
		static_assert(N == 128, "no wgmma wrapper for this tile width");
	}
}

/*
 * C = A B0^T (NB 1) or silu(A B0^T) * (A B1^T) (NB 2), with a BM x BN tile of
 * each product per block (see the top comment).  Grid: x = M tiles, y = N
 * tiles; with SPLIT (NB 1), z = the parts of K: part z of gridDim.z takes K
 * tiles [KT z / Z, KT (z + 1) / Z) and stores its f32 sums to P[z][M][N]
 * instead of C (sum_parts() adds them), and without it the kernel is the
 * one it was before parts existed.  Shared memory: STAGES x (A tile, NB B
 * tiles), 1024-byte aligned, then the full and empty mbarriers.
 */
template <typename T, int BN, int NB, int CM, bool SPLIT>
__global__ void __launch_bounds__(384, 1)
gemm_wgmma(const __grid_constant__ CUtensorMap tmA,
	   const __grid_constant__ CUtensorMap tmB0,
	   const __grid_constant__ CUtensorMap tmB1,
	   T *__restrict__ C, float *__restrict__ P, int M, int N, int K)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)     /* wgmma, TMA, clusters: sm_90a only */
	constexpr int B_BYTES = BN * BK * 2, STAGE_BYTES = A_BYTES + NB * B_BYTES;
	/* B boxes of BOXR rows: 128 where BN is a multiple, else one box of
	 * BN rows per product (TMA boxes go up to 256 rows) */
	constexpr int BOXR = BN % BOX_ROWS == 0 ? BOX_ROWS : BN, NBOX = NB * BN / BOXR;
	/* staging row pitch = 4 banks mod 32: conflict-free fragment stores */
	constexpr int PITCH = BN * 2 + (36 - BN / 2 % 32) % 32 * 4;
	static_assert(BN % 8 == 0 && BN <= 256 && NB * BN / 2 <= 160, "tile");
	static_assert(PITCH % 16 == 0 && PITCH / 4 % 32 == 4, "pitch");
	static_assert(BM * PITCH <= STAGES * STAGE_BYTES, "epilogue staging fits");
	extern __shared__ unsigned char smem_raw[];
	const uint32_t raw = smem_u32(smem_raw);
	const uint32_t base = (raw + 1023) & ~1023u;
	unsigned char *smem = smem_raw + (base - raw);
	const uint32_t full0 = base + STAGES * STAGE_BYTES, empty0 = full0 + 8 * STAGES;
	const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
	const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
	const int KT = (K + BK - 1) / BK, Z = SPLIT ? (int)gridDim.z : 1;
	const int kt0 = SPLIT ? (int)((int64_t)KT * blockIdx.z / Z) : 0;
	const int nkt = SPLIT ? (int)((int64_t)KT * (blockIdx.z + 1) / Z) - kt0 : KT;

	if (threadIdx.x == 0) {
		for (int s = 0; s < STAGES; s++) {
			mbar_init(full0 + 8 * s, 1);
			mbar_init(empty0 + 8 * s, 8 * CM);     /* every consumer warp of the cluster */
		}
		asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
	}
	if constexpr (CM > 1)
		cluster_sync();
	else
		__syncthreads();
	/* The kernel after this one in the call (the down projection after
	 * the first GEMM, the parts' sum after a split one) may be scheduled
	 * once every block of this grid has been here; and where this one was
	 * so scheduled (PDL), nothing is read or written before the kernel
	 * before it has finished (without PDL, both are no-ops). */
	asm volatile("griddepcontrol.launch_dependents;\n"
		     "griddepcontrol.wait;" ::: "memory");

	if (wg == 0) {
		/* producer */
		setmaxnreg_dec<40>();
		if (tid == 0) {
			const int rank = CM > 1 ? (int)cluster_rank() : 0;
			/* boxes of each B tile that start inside B (the rest is
			 * never stored, so it is not loaded either) */
			const int valid = min(BN / BOXR, (N - n0 + BOXR - 1) / BOXR);

			for (int i = 0; i < nkt; i++) {
				const int s = i % STAGES, kt = kt0 + i;
				const uint32_t fb = full0 + 8 * s;
				const uint32_t a = base + s * STAGE_BYTES, b = a + A_BYTES;

				mbar_wait(empty0 + 8 * s, (i / STAGES & 1) ^ 1);
				mbar_expect_tx(fb, A_BYTES + NB * valid * BOXR * 128);
				tma_load(a, &tmA, fb, kt * BK, m0);
				for (int j = rank; j < NBOX; j += CM) {
					/* box j: rows BOXR (j % (BN / BOXR)) of B matrix
					 * j / (BN / BOXR) */
					const CUtensorMap *map = j < NBOX / NB ? &tmB0 : &tmB1;
					const int row = n0 + j % (BN / BOXR) * BOXR;

					if (j % (BN / BOXR) >= valid)
						continue;
					if constexpr (CM > 1)
						tma_load_mc(b + j * BOXR * 128, map, fb, kt * BK,
							    row, (1 << CM) - 1);
					else
						tma_load(b + j * BOXR * 128, map, fb, kt * BK, row);
				}
			}
		}
	} else {
		/* consumers: rows c*64 .. c*64+63 of the tile */
		setmaxnreg_inc<232>();
		const int c = wg - 1, warp = tid / 32, lane = tid % 32;
		float acc[NB * BN / 2];

#pragma unroll
		for (int i = 0; i < NB * BN / 2; i++)
			acc[i] = 0.f;
		for (int i = 0; i < nkt; i++) {
			const int s = i % STAGES;
			const uint32_t a = base + s * STAGE_BYTES + c * 64 * 128;
			const uint32_t b = base + s * STAGE_BYTES + A_BYTES;

			mbar_wait(full0 + 8 * s, i / STAGES & 1);
			wgmma_fence();
#pragma unroll
			for (int kk = 0; kk < BK / 16; kk++) {
				/* K-major: k16 is 32 bytes along the swizzled rows,
				 * 8-row groups are 1024 bytes apart (SBO). */
				const uint64_t da = sw128_desc(a + kk * 32, 16, 1024);
#pragma unroll
				for (int m = 0; m < NB; m++) {
					const uint64_t db = sw128_desc(b + m * B_BYTES + kk * 32, 16, 1024);
					wgmma_n<T, BN, 0>(acc + m * BN / 2, da, db);
				}
			}
			wgmma_commit();
			wgmma_wait<1>();        /* the group of tile i-1 retired */
			if (i > 0 && lane == 0) {
				const uint32_t e = empty0 + 8 * ((i - 1) % STAGES);
				if constexpr (CM > 1)
					for (int r = 0; r < CM; r++)
						mbar_arrive_cluster(e, r);
				else
					mbar_arrive(e);
			}
		}
		wgmma_wait<0>();

		const int r = warp * 16 + lane / 4;
		if constexpr (SPLIT) {
			static_assert(NB == 1, "parts of K: one product");
			/* a part of K: f32 sums, rows r and r + 8 of each 8 columns
			 * (N % 8 == 0, so a pair inside N is whole) */
			float *p = P + (int64_t)blockIdx.z * M * N;
#pragma unroll
			for (int i = 0; i < BN / 8; i++) {
				const int gm = m0 + c * 64 + r, gn = n0 + 8 * i + 2 * (lane % 4);

				if (gn >= N)
					continue;
				if (gm < M)
					*(float2 *)(p + (int64_t)gm * N + gn) =
						make_float2(acc[4 * i], acc[4 * i + 1]);
				if (gm + 8 < M)
					*(float2 *)(p + (int64_t)(gm + 8) * N + gn) =
						make_float2(acc[4 * i + 2], acc[4 * i + 3]);
			}
		} else {
			/* epilogue: both consumers are done with the stages (bar 1) */
			named_bar(1, 256);
			unsigned char *stg = smem + c * 64 * PITCH;
#pragma unroll
			for (int i = 0; i < BN / 8; i++) {
				const int col = 8 * i + 2 * (lane % 4);
				float v[4];
#pragma unroll
				for (int e = 0; e < 4; e++)
					v[e] = NB == 2 ? silu_mul(acc[4 * i + e], acc[BN / 2 + 4 * i + e])
						       : acc[4 * i + e];
				T v0[2] = {from_f32<T>(v[0]), from_f32<T>(v[1])};
				T v1[2] = {from_f32<T>(v[2]), from_f32<T>(v[3])};
				*(uint32_t *)(stg + r * PITCH + col * 2) = *(uint32_t *)v0;
				*(uint32_t *)(stg + (r + 8) * PITCH + col * 2) = *(uint32_t *)v1;
			}
			named_bar(2 + c, 128);
			for (int idx = tid; idx < 64 * (BN / 8); idx += 128) {
				const int row = idx / (BN / 8), ch = idx % (BN / 8);
				const int gm = m0 + c * 64 + row, gn = n0 + ch * 8;
				if (gm < M && gn < N)
					*(uint4 *)(C + (int64_t)gm * N + gn) =
						*(const uint4 *)(stg + row * PITCH + ch * 16);
			}
		}
	}
	/* a block's shared memory must outlive its peer's remote arrives */
	if constexpr (CM > 1)
		cluster_sync();
#endif /* sm_90a */
}
#endif /* WGMMA */

/* ---- mma.sync fallback: any K, N ---------------------------------------- */

#define FTHREADS 256            /* 8 warps */
#define FWARPS_M 2
#define FWARPS_N 4
#define FWTM (FBM / FWARPS_M)
#define FWTN (FBN / FWARPS_N)
#define FFM (FWTM / 16)
#define FFN (FWTN / 16)
#define FLDK (FBK + 8)          /* padded smem row length, elements */
#define FA_STAGE (FBM * FLDK)
#define FB_STAGE (FBN * FLDK)

static __device__ __forceinline__ void cp_async16(void *smem, const void *gmem,
						  int bytes)
{
	const uint32_t s = smem_u32(smem);
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
		     :: "r"(s), "l"(gmem), "r"(bytes));
}

static __device__ __forceinline__ void cp_commit(void)
{
	asm volatile("cp.async.commit_group;\n" ::);
}

template <int N>
static __device__ __forceinline__ void cp_wait(void)
{
	asm volatile("cp.async.wait_group %0;\n" :: "n"(N));
}

/* Rows r0..r0+ROWS-1, columns k0..k0+FBK-1 of X[nrows,K] into dst[ROWS][FLDK]. */
template <typename T, int ROWS, bool VEC>
static __device__ __forceinline__ void load_rows(T *dst, const T *X, int nrows,
						 int K, int r0, int k0)
{
	if constexpr (VEC) {
		for (int c = threadIdx.x; c < ROWS * FBK / 8; c += FTHREADS) {
			const int r = c / (FBK / 8), k = c % (FBK / 8) * 8;
			const bool ok = r0 + r < nrows && k0 + k < K;
			const T *src = ok ? X + (int64_t)(r0 + r) * K + k0 + k : X;
			cp_async16(dst + r * FLDK + k, src, ok ? 16 : 0);
		}
	} else {
		for (int e = threadIdx.x; e < ROWS * FBK; e += FTHREADS) {
			const int r = e / FBK, k = e % FBK;
			const bool ok = r0 + r < nrows && k0 + k < K;
			dst[r * FLDK + k] = ok ? X[(int64_t)(r0 + r) * K + k0 + k]
					      : from_f32<T>(0.f);
		}
	}
}

/* Four 8x8 b16 matrices from shared memory; lane l gives row l%8 of matrix l/8. */
static __device__ __forceinline__ void ldsm_x4(uint32_t *r, const void *p)
{
	unsigned a = (unsigned)__cvta_generic_to_shared(p);
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
		     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}

/* ---- shared: mma16816 (kept equal in matmul.cu, fused_mlp.cu, flash_attention.cu; tests/t0023-kernel-twins.sh) ---- */
/* d += a b, m16n8k16, row.col, f32 accumulate. */
template <typename T>
static __device__ __forceinline__ void mma16816(float *d, const uint32_t *a,
						uint32_t b0, uint32_t b1)
{
	if constexpr (std::is_same_v<T, __half>)
		asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
			     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
			     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
			     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]),
			       "r"(b0), "r"(b1));
	else
		asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
			     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
			     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
			     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]),
			       "r"(b0), "r"(b1));
}
/* ---- end shared: mma16816 ---- */

/* ---- shared: store2 (kept equal in matmul.cu, fused_mlp.cu; tests/t0023-kernel-twins.sh) ---- */
/* C[m, n..n+1] = v0, v1, inside C only; one 4-byte store when pair. */
template <typename T>
static __device__ __forceinline__ void store2(T *C, int M, int N, int m, int n,
					      float v0, float v1, bool pair)
{
	if (m >= M)
		return;
	T *p = C + (int64_t)m * N + n;
	if (pair && n + 1 < N) {
		T e[2] = {from_f32<T>(v0), from_f32<T>(v1)};
		*reinterpret_cast<uint32_t *>(p) = *reinterpret_cast<uint32_t *>(e);
	} else {
		if (n < N)
			p[0] = from_f32<T>(v0);
		if (n + 1 < N)
			p[1] = from_f32<T>(v1);
	}
}
/* ---- end shared: store2 ---- */

/*
 * C = A B0^T, or with DUAL C = silu(A B0^T) * (A B1^T).  Smem: FSTAGES x
 * (A tile, B0 tile [, B1 tile]), each [rows][FBK + 8].
 */
template <typename T, bool DUAL, bool VEC>
__global__ void __launch_bounds__(FTHREADS)
gemm_mma(const T *__restrict__ A, const T *__restrict__ B0,
	   const T *__restrict__ B1, T *__restrict__ C, int M, int N, int K)
{
	constexpr int NB = DUAL ? 2 : 1, STAGE = FA_STAGE + NB * FB_STAGE;
	extern __shared__ __align__(128) unsigned char smem[];
	T *tiles = (T *)smem;
	const int warp = threadIdx.x / 32, wm = warp / FWARPS_N, wn = warp % FWARPS_N;
	const int lane = threadIdx.x % 32;
	const int m0 = blockIdx.y * FBM, n0 = blockIdx.x * FBN;
	const int KT = (K + FBK - 1) / FBK;
	float acc[NB][FFM][2 * FFN][4] = {};

	auto load = [&](int stage, int kt) {
		T *st = tiles + stage * STAGE;
		load_rows<T, FBM, VEC>(st, A, M, K, m0, kt * FBK);
		load_rows<T, FBN, VEC>(st + FA_STAGE, B0, N, K, n0, kt * FBK);
		if constexpr (DUAL)
			load_rows<T, FBN, VEC>(st + FA_STAGE + FB_STAGE, B1, N, K, n0, kt * FBK);
	};
	for (int s = 0; s < FSTAGES - 1; s++) {
		if (s < KT)
			load(s, s);
		cp_commit();
	}
	for (int kt = 0; kt < KT; kt++) {
		cp_wait<FSTAGES - 2>();
		__syncthreads();        /* tile kt landed; stage kt-1 is free */
		if (kt + FSTAGES - 1 < KT)
			load((kt + FSTAGES - 1) % FSTAGES, kt + FSTAGES - 1);
		cp_commit();

		/*
		 * A: lane l addresses row l%16, k block l/16 of a 16x16 piece.
		 * B [n][k]: matrices (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15,
		 * k 0-7), (n 8-15, k 8-15) = b0, b1 of two n8 tiles.
		 */
		const T *st = tiles + kt % FSTAGES * STAGE;
		const T *as = st + (wm * FWTM + (lane & 15)) * FLDK + (lane >> 4) * 8;
		const T *bs = st + FA_STAGE +
			      (wn * FWTN + (lane & 7) + (lane >> 4) * 8) * FLDK +
			      (lane >> 3 & 1) * 8;
#pragma unroll
		for (int kk = 0; kk < FBK; kk += 16) {
			uint32_t af[FFM][4];
#pragma unroll
			for (int i = 0; i < FFM; i++)
				ldsm_x4(af[i], as + i * 16 * FLDK + kk);
#pragma unroll
			for (int b = 0; b < NB; b++) {
#pragma unroll
				for (int j = 0; j < FFN; j++) {
					uint32_t bf[4];
					ldsm_x4(bf, bs + b * FB_STAGE + j * 16 * FLDK + kk);
#pragma unroll
					for (int i = 0; i < FFM; i++) {
						mma16816<T>(acc[b][i][2 * j], af[i], bf[0], bf[1]);
						mma16816<T>(acc[b][i][2 * j + 1], af[i], bf[2], bf[3]);
					}
				}
			}
		}
	}
	cp_wait<0>();

	/* m16n8 accumulator layout: c0,c1 at (g, 2t..), c2,c3 at (g+8, 2t..). */
	const bool pair = N % 2 == 0 && ((uintptr_t)C & 3) == 0;
	const int g = lane / 4, tq = lane % 4;
#pragma unroll
	for (int i = 0; i < FFM; i++) {
#pragma unroll
		for (int j = 0; j < 2 * FFN; j++) {
			const int m = m0 + wm * FWTM + i * 16 + g;
			const int n = n0 + wn * FWTN + j * 8 + 2 * tq;
			float v[4];
#pragma unroll
			for (int e = 0; e < 4; e++)
				v[e] = DUAL ? silu_mul(acc[0][i][j][e], acc[NB - 1][i][j][e])
					    : acc[0][i][j][e];
			store2(C, M, N, m, n, v[0], v[1], pair);
			store2(C, M, N, m + 8, n, v[2], v[3], pair);
		}
	}
}

/* f32: C = A B0^T [silu * A B1^T], 64x64 tile, BK 16, 4x4 per thread. */
template <bool DUAL>
__global__ void __launch_bounds__(256)
sgemm_nt(const float *__restrict__ A, const float *__restrict__ B0,
	 const float *__restrict__ B1, float *__restrict__ C, int M, int N, int K)
{
	constexpr int NB = DUAL ? 2 : 1;
	__shared__ float As[16][64 + 4];        /* [k][m] */
	__shared__ float Bs[NB][16][64 + 4];    /* [k][n] */
	const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
	const int m0 = blockIdx.y * 64, n0 = blockIdx.x * 64;
	float acc[NB][4][4] = {};

	for (int k0 = 0; k0 < K; k0 += 16) {
		for (int e = threadIdx.x; e < 64 * 16; e += 256) {
			const int r = e / 16, k = e % 16;
			const bool okk = k0 + k < K;
			As[k][r] = okk && m0 + r < M ? A[(int64_t)(m0 + r) * K + k0 + k] : 0.f;
			Bs[0][k][r] = okk && n0 + r < N ? B0[(int64_t)(n0 + r) * K + k0 + k] : 0.f;
			if constexpr (DUAL)
				Bs[NB - 1][k][r] = okk && n0 + r < N ?
					B1[(int64_t)(n0 + r) * K + k0 + k] : 0.f;
		}
		__syncthreads();
#pragma unroll
		for (int k = 0; k < 16; k++) {
			float a[4];
#pragma unroll
			for (int i = 0; i < 4; i++)
				a[i] = As[k][ty + 16 * i];
#pragma unroll
			for (int b = 0; b < NB; b++)
#pragma unroll
				for (int j = 0; j < 4; j++) {
					const float bv = Bs[b][k][tx + 16 * j];
#pragma unroll
					for (int i = 0; i < 4; i++)
						acc[b][i][j] = fmaf(a[i], bv, acc[b][i][j]);
				}
		}
		__syncthreads();
	}
#pragma unroll
	for (int i = 0; i < 4; i++)
#pragma unroll
		for (int j = 0; j < 4; j++) {
			const int m = m0 + ty + 16 * i, n = n0 + tx + 16 * j;
			if (m < M && n < N)
				C[(int64_t)m * N + n] = DUAL ? silu_mul(acc[0][i][j], acc[NB - 1][i][j])
							     : acc[0][i][j];
		}
}

template <typename T, bool DUAL, bool VEC>
static int launch_mma(const T *A, const T *B0, const T *B1, T *C, int M, int N,
		     int K, cudaStream_t st)
{
	constexpr int NB = DUAL ? 2 : 1;
	const size_t smem = (size_t)FSTAGES * (FA_STAGE + NB * FB_STAGE) * sizeof(T);
	dim3 grid((N + FBN - 1) / FBN, (M + FBM - 1) / FBM);

	if (cudaFuncSetAttribute(gemm_mma<T, DUAL, VEC>,
				 cudaFuncAttributeMaxDynamicSharedMemorySize,
				 (int)smem) != cudaSuccess)
		return -1;
	gemm_mma<T, DUAL, VEC><<<grid, FTHREADS, smem, st>>>(A, B0, B1, C, M, N, K);
	return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

/* ---- host --------------------------------------------------------------- */

#if WGMMA
/* ---- shared: tensor-map (kept equal in matmul.cu, fused_mlp.cu, flash_attention.cu; tests/t0023-kernel-twins.sh) ---- */
/* cuTensorMapEncodeTiled through the runtime's driver entry point, so the
 * kernel needs no libcuda at link time; NULL if the driver has none. */
static PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder(void)
{
	static PFN_cuTensorMapEncodeTiled_v12000 fn;
	static bool tried;

	if (!tried) {
		void *p = nullptr;
		cudaDriverEntryPointQueryResult q;

		tried = true;
		if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000,
						     cudaEnableDefault, &q) == cudaSuccess &&
		    q == cudaDriverEntryPointSuccess)
			fn = (PFN_cuTensorMapEncodeTiled_v12000)p;
	}
	return fn;
}

/* A row-major [rows, cols] 16-bit matrix, box of box_rows x 64 columns
 * (128 bytes: the 128-byte swizzle span), zero fill outside. */
template <typename T>
static bool tensor_map(CUtensorMap *map, const T *p, int64_t rows, int64_t cols,
		       int box_rows)
{
	PFN_cuTensorMapEncodeTiled_v12000 enc = tensor_map_encoder();
	const cuuint64_t dim[2] = {(cuuint64_t)cols, (cuuint64_t)rows};
	const cuuint64_t stride[1] = {(cuuint64_t)cols * sizeof(T)};
	const cuuint32_t box[2] = {64, (cuuint32_t)box_rows}, estride[2] = {1, 1};

	return enc && enc(map, std::is_same_v<T, __half> ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
					: CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
			  2, (void *)p, dim, stride, box, estride,
			  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
			  CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
			  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}
/* ---- end shared: tensor-map ---- */

template <typename T, int BN, int NB, int CM, bool SPLIT>
static int launch_cluster(const CUtensorMap &ta, const CUtensorMap &tb0,
			  const CUtensorMap &tb1, T *C, float *P, int M, int N, int K,
			  int mt, int nt, int parts, cudaStream_t st)
{
	cudaLaunchConfig_t cfg = {};
	cudaLaunchAttribute attr[2];

	if (cudaFuncSetAttribute(gemm_wgmma<T, BN, NB, CM, SPLIT>,
				 cudaFuncAttributeMaxDynamicSharedMemorySize,
				 WG_SMEM(NB, BN)) != cudaSuccess)
		return -1;
	cfg.gridDim = dim3(mt, nt, parts);
	cfg.blockDim = dim3(384);
	cfg.dynamicSmemBytes = WG_SMEM(NB, BN);
	cfg.stream = st;
	attr[0].id = cudaLaunchAttributeClusterDimension;
	attr[0].val.clusterDim.x = CM;
	attr[0].val.clusterDim.y = 1;
	attr[0].val.clusterDim.z = 1;
	cfg.attrs = attr;
	cfg.numAttrs = 1;
	/* the down projection (NB 1) may start under the first GEMM's end: it
	 * waits for it before reading h (griddepcontrol.wait); the first GEMM
	 * waits for whatever came before the call, as any launch does */
	if (PDL && NB == 1) {
		attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
		attr[1].val.programmaticStreamSerializationAllowed = 1;
		cfg.numAttrs = 2;
	}
	return cudaLaunchKernelEx(&cfg, gemm_wgmma<T, BN, NB, CM, SPLIT>, ta, tb0, tb1, C,
				  P, M, N, K) == cudaSuccess ? 0 : -1;
}

/* ---- shared: sm-count (kept equal in matmul.cu, fused_mlp.cu, reduce.cu, softmax.cu, flash_attention.cu; tests/t0023-kernel-twins.sh) ---- */
/* Attribute a of the current device, asked once into *n (fallback if it
 * cannot tell). */
static int device_attr(int *n, cudaDeviceAttr a, int fallback)
{
	if (*n <= 0) {
		int d = 0;

		if (cudaGetDevice(&d) != cudaSuccess ||
		    cudaDeviceGetAttribute(n, a, d) != cudaSuccess || *n <= 0)
			*n = fallback;
		(void)cudaGetLastError();
	}
	return *n;
}

/* Multiprocessors of the current device (132 if it cannot tell). */
static int sm_count(void)
{
	static int n;

	return device_attr(&n, cudaDevAttrMultiProcessorCount, 132);
}
/* ---- end shared: sm-count ---- */

/*
 * The first GEMM's tile width for M x N: each block of the one-block-per-SM
 * kernel takes time ~ BN, the grid runs in ceil(tiles / resident) waves, so
 * minimize waves * BN (ties: the first in cand[], so 88 only where it is
 * strictly better).  2048 x 5504: 128 -> 688 tiles, 6 waves on 132 SMs
 * (the last one 21% full); 136 -> 656 tiles, 5 waves: 680 against 768.
 * 512 x 5504: 128 -> 172 tiles, 2 waves (the second 30% full); 88 -> 252
 * tiles, 2 waves of tiles 31% narrower: 176 against 256.  Shapes of one
 * wave of 88 take 88; 8 x 12288 (a test shape) keeps 128.
 */
static int pick_bn1(int M, int N)
{
	static const int cand[] = {128, 136, 144, 160, 88};
	const int mt = (M + BM - 1) / BM, cm = CLUSTER > 1 && mt % CLUSTER == 0 ? CLUSTER : 1;
	const int64_t slots = (int64_t)(sm_count() / cm * cm);
	int best = BN1;
	int64_t best_cost = -1;

	static_assert(BN1_FIT <= 1 || BN1_FIT == 88 || BN1_FIT == 136 || BN1_FIT == 144 ||
		      BN1_FIT == 160,
		      "BN1_FIT: 0, 1 or a width with a wgmma wrapper");
	if (BN1_FIT != 1)
		return BN1_FIT ? BN1_FIT : BN1;
	for (int bn : cand) {
		const int64_t tiles = (int64_t)mt * ((N + bn - 1) / bn);
		const int64_t cost = (tiles + slots - 1) / slots * bn;

		if (best_cost < 0 || cost < best_cost) {
			best = bn;
			best_cost = cost;
		}
	}
	return best;
}

/*
 * How many parts of K the down projection's blocks split into: where its
 * 128 x 256 tiles are too few to fill the multiprocessors (512 tokens,
 * D 2048: 4 x 8 = 32 tiles for 132 SMs, a quarter of the GPU busy), the
 * most parts, up to SPLITK, that still fit in one wave with at least 8 K
 * tiles (of 64) each.  The parts' f32 sums go to the workspace and one more
 * kernel adds them in part order (the same bits every call).
 */
static int pick_parts(int M, int N, int K)
{
	const int64_t tiles = (int64_t)((M + BM - 1) / BM) * ((N + BN2 - 1) / BN2);
	const int KT = (K + BK - 1) / BK;
	int z = 1;

	while (z * 2 <= SPLITK && tiles * z * 2 <= sm_count() && KT / (z * 2) >= 8)
		z *= 2;
	return z;
}

/* C = the sum of the parts P[z][M][N] in the input dtype (N % 8 == 0). */
template <typename T>
__global__ void __launch_bounds__(256)
sum_parts(const float *__restrict__ P, T *__restrict__ C, int64_t MN, int parts)
{
#if __CUDA_ARCH__ >= 900
	/* launched dependent on the parts' GEMM (PDL): its sums are visible
	 * after this */
	asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
	for (int64_t i = 4 * ((int64_t)blockIdx.x * blockDim.x + threadIdx.x); i < MN;
	     i += 4 * (int64_t)gridDim.x * blockDim.x) {
		float4 v = *(const float4 *)(P + i);

		for (int z = 1; z < parts; z++) {
			const float4 w = *(const float4 *)(P + z * MN + i);

			v.x += w.x;
			v.y += w.y;
			v.z += w.z;
			v.w += w.w;
		}
		T o[4] = {from_f32<T>(v.x), from_f32<T>(v.y), from_f32<T>(v.z), from_f32<T>(v.w)};
		*(uint2 *)(C + i) = *(const uint2 *)o;
	}
}

/* The parts of K, unpaired (a part's blocks share no B tile with their
 * neighbours' parts), then their sums added into C (with PDL, a
 * programmatic dependent launch: scheduled under the parts' end). */
template <typename T, int BN>
static int launch_parts(const CUtensorMap &ta, const CUtensorMap &tb, T *C, float *P,
			int M, int N, int K, int mt, int nt, int parts, cudaStream_t st)
{
	const int64_t MN = (int64_t)M * N;

	cudaLaunchConfig_t cfg = {};
	cudaLaunchAttribute at[1];

	if (launch_cluster<T, BN, 1, 1, true>(ta, tb, tb, C, P, M, N, K, mt, nt, parts,
					      st) != 0)
		return -1;
	cfg.gridDim = dim3((unsigned)std::min<int64_t>((MN / 4 + 255) / 256, 8 * sm_count()));
	cfg.blockDim = dim3(256);
	cfg.stream = st;
	if (PDL) {
		at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
		at[0].val.programmaticStreamSerializationAllowed = 1;
		cfg.attrs = at;
		cfg.numAttrs = 1;
	}
	return cudaLaunchKernelEx(&cfg, sum_parts<T>, (const float *)P, C, MN, parts) ==
	       cudaSuccess ? 0 : -1;
}

/* 0 launched, 1 not possible here (use the fallback), -1 launch error;
 * parts > 1 (NB 1): the sums of parts of K to P, then added into C */
template <typename T, int BN, int NB>
static int launch_wgmma(const T *A, const T *B0, const T *B1, T *C, float *P,
			int parts, int M, int N, int K, cudaStream_t st)
{
	CUtensorMap ta, tb0, tb1;
	const int mt = (M + BM - 1) / BM, nt = (N + BN - 1) / BN;

	if (nt > 65535 || !tensor_map(&ta, A, M, K, BM) ||
	    !tensor_map(&tb0, B0, N, K, BN % BOX_ROWS == 0 ? BOX_ROWS : BN) ||
	    !tensor_map(&tb1, NB > 1 ? B1 : B0, N, K, BN % BOX_ROWS == 0 ? BOX_ROWS : BN))
		return 1;
	if constexpr (NB == 1) {
		if (parts > 1)
			return launch_parts<T, BN>(ta, tb0, C, P, M, N, K, mt, nt, parts, st);
	}
	/* clusters pair M tiles; an odd count runs unpaired */
	if (CLUSTER > 1 && mt % CLUSTER == 0)
		return launch_cluster<T, BN, NB, CLUSTER, false>(ta, tb0, tb1, C, P, M, N, K,
								 mt, nt, 1, st);
	return launch_cluster<T, BN, NB, 1, false>(ta, tb0, tb1, C, P, M, N, K, mt, nt,
						   1, st);
}

#endif /* WGMMA */

/* ---- shared: compute-capability (kept equal in matmul.cu, fused_mlp.cu, flash_attention.cu, cross_entropy.cu; tests/t0023-kernel-twins.sh) ---- */
/* The device's compute capability major (0 where it cannot be read), asked
 * once. */
static int cc_major(void)
{
	static int cc = -1;

	if (cc < 0) {
		int dev = 0, major = 0;

		if (cudaGetDevice(&dev) != cudaSuccess ||
		    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor,
					   dev) != cudaSuccess)
			major = 0;
		cc = major;
	}
	return cc;
}

/* wgmma needs compute capability 9.0 (the build targets sm_90a there). */
[[maybe_unused]] static bool have_wgmma(void)
{
	return cc_major() == 9;
}
/* ---- end shared: compute-capability ---- */

/* C[M,N] = A[M,K] B0[N,K]^T, or silu(A B0^T) * (A B1^T) when B1; P: the
 * f32 scratch for the parts of K (pick_parts(M, N, K) x M x N floats) */
template <typename T>
static int gemm_nt(const T *A, const T *B0, const T *B1, T *C, float *P, int M,
		   int N, int K, cudaStream_t st)
{
	if ((M + 63) / 64 > 65535)      /* gridDim.y of the fallbacks */
		return -1;
	if constexpr (sizeof(T) == 4) {
		dim3 grid((N + 63) / 64, (M + 63) / 64);
		if (B1)
			sgemm_nt<true><<<grid, 256, 0, st>>>(A, B0, B1, C, M, N, K);
		else
			sgemm_nt<false><<<grid, 256, 0, st>>>(A, B0, B1, C, M, N, K);
		return cudaGetLastError() == cudaSuccess ? 0 : -1;
	} else {
		const bool vec = K % 8 == 0 &&
			(((uintptr_t)A | (uintptr_t)B0 | (uintptr_t)B1) & 15) == 0;

#if WGMMA
		if (vec && N % 8 == 0 && ((uintptr_t)C & 15) == 0 && have_wgmma()) {
			int rc;

			switch (B1 ? pick_bn1(M, N) : 0) {
			case 0:
				rc = launch_wgmma<T, BN2, 1>(A, B0, B1, C, P, pick_parts(M, N, K),
							     M, N, K, st);
				break;
			case 88:
				rc = launch_wgmma<T, 88, 2>(A, B0, B1, C, P, 1, M, N, K, st);
				break;
			case 136:
				rc = launch_wgmma<T, 136, 2>(A, B0, B1, C, P, 1, M, N, K, st);
				break;
			case 144:
				rc = launch_wgmma<T, 144, 2>(A, B0, B1, C, P, 1, M, N, K, st);
				break;
			case 160:
				rc = launch_wgmma<T, 160, 2>(A, B0, B1, C, P, 1, M, N, K, st);
				break;
			default:
				rc = launch_wgmma<T, BN1, 2>(A, B0, B1, C, P, 1, M, N, K, st);
				break;
			}
			if (rc <= 0)
				return rc;
		}
#endif
		if (B1)
			return vec ? launch_mma<T, true, true>(A, B0, B1, C, M, N, K, st)
				   : launch_mma<T, true, false>(A, B0, B1, C, M, N, K, st);
		return vec ? launch_mma<T, false, true>(A, B0, B1, C, M, N, K, st)
			   : launch_mma<T, false, false>(A, B0, B1, C, M, N, K, st);
	}
}

static size_t elem_size(enum ak_dtype t)
{
	return t == AK_F32 ? 4 : 2;
}

/* Parts of K for the down projection (T x D, K = F) where the wgmma
 * kernel takes it, else 1. */
static int down_parts(enum ak_dtype t, int64_t Tn, int64_t D, int64_t F)
{
#if WGMMA
	if (t != AK_F32 && Tn > 0 && D > 0 && F > 0 && have_wgmma())
		return pick_parts((int)Tn, (int)D, (int)F);
#endif
	(void)t, (void)Tn, (void)D, (void)F;
	return 1;
}

/* Bytes of h, rounded to 256; the parts' f32 sums follow. */
static size_t h_bytes(int64_t Tn, int64_t F, enum ak_dtype t)
{
	return ((size_t)(Tn * F) * elem_size(t) + 255) & ~(size_t)255;
}

extern "C" size_t ak_workspace_size(const struct ak_args *a)
{
	const int64_t T = a->in[0].shape[0], D = a->in[0].shape[1];
	const int64_t F = a->in[1].shape[0];
	const enum ak_dtype t = a->in[0].dtype;
	const int parts = down_parts(t, T, D, F);

	return h_bytes(T, F, t) + (parts > 1 ? (size_t)parts * T * D * sizeof(float) : 0);
}

template <typename T>
static int run(const struct ak_args *a)
{
	const int Tn = (int)a->in[0].shape[0], D = (int)a->in[0].shape[1];
	const int F = (int)a->in[1].shape[0];
	const T *x = (const T *)a->in[0].data, *wg = (const T *)a->in[1].data;
	const T *wu = (const T *)a->in[2].data, *wd = (const T *)a->in[3].data;
	T *h = (T *)a->workspace, *y = (T *)a->out[0].data;
	cudaStream_t st = (cudaStream_t)a->stream;

	if (Tn == 0 || D == 0)
		return 0;
	if (F == 0)
		return cudaMemsetAsync(y, 0, (size_t)Tn * D * sizeof(T), st) ==
		       cudaSuccess ? 0 : -1;
	if (!h || a->workspace_size < ak_workspace_size(a))
		return -1;
	float *P = (float *)((char *)a->workspace + h_bytes(Tn, F, a->in[0].dtype));

	if (gemm_nt<T>(x, wg, wu, h, nullptr, Tn, F, D, st) != 0)
		return -1;
	return gemm_nt<T>(h, wd, nullptr, y, P, Tn, D, F, st);
}

extern "C" int ak_kernel(const struct ak_args *a)
{
	switch (a->in[0].dtype) {
	case AK_F16:
		return run<__half>(a);
	case AK_BF16:
		return run<__nv_bfloat16>(a);
	case AK_F32:
		return run<float>(a);
	default:
		return -1;
	}
}
