/*
 * matmul: C[M,N] = A[M,K] B[K,N], row-major, f32 accumulation.
 *
 * f16/bf16 on Hopper (sm_90a): a warp-specialized wgmma kernel.
 *   - One block of 3 warpgroups computes a 128 x 256 tile of C (2048^3:
 *     128 tiles, one wave on 132 SMs).
 *     Warpgroup 0 is the producer: one thread issues TMA copies
 *     (cp.async.bulk.tensor) of the A tile (128 x 64, K-major) and the B tile
 *     (64 x 256, N-major, in 64-column boxes) into a STAGES-deep ring of
 *     shared-memory stages, each completing on a "full" mbarrier.  The
 *     tensor maps use the 128-byte swizzle, which is the layout wgmma reads
 *     without bank conflicts; TMA zero-fills whatever lies outside A or B, so
 *     ragged M, N and K need no special code.
 *   - Warpgroups 1 and 2 are consumers: each owns 64 rows of the tile and
 *     issues wgmma.mma_async m64n256k16 (A and B straight from shared memory
 *     through matrix descriptors; B with the transpose bit, since it is
 *     N-major) with the accumulators in registers.  A consumer keeps one
 *     wgmma group in flight and frees a stage (an arrive on its "empty"
 *     mbarrier) as soon as the group that read it has retired.
 *   - setmaxnreg gives the consumers 232 registers and the producer 40.
 *   - CLUSTER 2 would pair the blocks of two vertically adjacent tiles:
 *     they share the B tile, each loads half of it and multicasts it to
 *     both, so the L2 -> SM traffic per tile drops from (BM + BN) to
 *     (BM + BN/2) rows, but a stage is then free only when the consumers of
 *     both blocks released it (remote mbarrier arrives), which couples the
 *     two.  Measured on an H200 at 2048^3 f16: 42.8 us with clusters of 2,
 *     28.0 us without (CLUSTER 1, the default), where cuBLAS takes 28.2;
 *     clusters of 4 (42.8) and TMA prefetch into L2 (48.4) did not help
 *     either (doc/results/h200/matmul.md).
 *   - Epilogue: accumulators -> the input dtype -> a padded shared-memory
 *     tile (conflict-free) -> 16-byte coalesced global stores inside C.
 *   - GROUP_M > 0 orders the tiles GROUP_M at a time down M, so that a
 *     wave's blocks share more of A and B in L2 (8192^3).
 *   - Where 128 x 256 tiles would fill at most half the SMs (1000^3: 32),
 *     the same kernel runs 128 x 128 tiles (m64n128k16; NARROW 1).
 * TMA needs 16-byte aligned rows, so this path takes K % 8 == 0 and
 * N % 8 == 0.  Other f16/bf16 shapes take an mma.sync m16n8k16 kernel:
 * 8 warps on a 128 x 128 tile, ldmatrix (.trans for B) from rows padded by
 * 8 elements, a 3-stage cp.async pipeline, element-wise fills where 16-byte
 * copies don't fit.
 *
 * f16/bf16 with M <= 64 (a decode step) and K, N multiples of 8 take
 * gemm_skinny (SKINNY 1): all M rows in one block, K split into slices so
 * that every SM streams its share of B, the slices summed from an f32
 * workspace.
 *
 * f32: a plain shared-memory tiled SIMT kernel (64 x 64 tile, 4 x 4 outputs
 * per thread, FFMA), exact f32 math; tensor-core TF32 would lose precision.
 */
#include <cuda_runtime.h>
#include <cudaTypedefs.h>       /* CUtensorMap and the encoder's type; no libcuda link */
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>
#include <type_traits>
#include "autokernel.h"

/*
 * Tunables.  WGMMA 1 selects the Hopper kernel below for f16/bf16 (on
 * devices without wgmma, build for their arch: that kernel is compiled only
 * for sm_90a); 0 keeps every f16/bf16 shape on the mma.sync kernel (65.8 us
 * at 2048^3 on the H200).
 */
#define WGMMA 1     /* autokernel: tune 0,1 */
#define STAGES 4    /* autokernel: tune 3,4 */
#define CLUSTER 1   /* autokernel: tune 1,2 */
#define SKINNY 1    /* autokernel: tune 0,1 */
#define NARROW 1    /* autokernel: tune 0,1 */
#define PDL 1       /* autokernel: tune 0,1 */
#define GROUP_M 16  /* autokernel: tune 0,8,16 */

#define BN 256                          /* tile columns (one m64n256k16 per k16) */
#define BN_NARROW 128                   /* where 256-column tiles leave SMs idle */
#define BM 128                          /* two consumer warpgroups x 64 rows */
#define BK 64                           /* one 128-byte swizzle row of 16-bit elements */
#define A_BYTES (BM * BK * 2)           /* 16 KB */
/* shared memory of a block with TN-column tiles: the stages, 1 KB of
 * alignment, the mbarriers */
#define WG_SMEM(TN) (STAGES * (A_BYTES + BK * (TN) * 2) + 1024 + 16 * STAGES)

/* mma.sync path (K or N not a multiple of 8, or WGMMA 0) */
#define FBM 128
#define FBN 128
#define FBK 64
#define FSTAGES 3

/* ---- shared: helpers (kept equal in matmul.cu, fused_mlp.cu; tests/t0023-kernel-twins.sh) ---- */
template <typename T> static __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ __half from_f32<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

static __device__ __forceinline__ uint32_t smem_u32(const void *p)
{
	return (uint32_t)__cvta_generic_to_shared(p);
}
/* ---- end shared: helpers ---- */

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

/* d[0..127] += A B, m64n256k16; TB: B is N-major (transposed). */
template <typename T, int TB>
static __device__ __forceinline__ void wgmma_n256(float *d, uint64_t da, uint64_t db)
{
	if constexpr (std::is_same_v<T, __half>)
		WGMMA_N256("f16");
	else
		WGMMA_N256("bf16");
}

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

/* d[0..63] += A B, m64n128k16: the narrow tile (TN 128) */
template <typename T, int TB>
static __device__ __forceinline__ void wgmma_n128(float *d, uint64_t da, uint64_t db)
{
	if constexpr (std::is_same_v<T, __half>)
		WGMMA_N128("f16", 1);
	else
		WGMMA_N128("bf16", 1);
}

/*
 * The wgmma kernel (see the top comment).  Grid: x = M tiles (a multiple
 * of the cluster size), y = N tiles.  Shared memory: STAGES x (A tile, B tile),
 * 1024-byte aligned, then the full and empty mbarriers.
 */
template <typename T, int CM, int TN, bool GROUPED>
__global__ void __launch_bounds__(384, 1)
gemm_wgmma(const __grid_constant__ CUtensorMap tmA,
	   const __grid_constant__ CUtensorMap tmB,
	   T *__restrict__ C, int M, int N, int K)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)     /* wgmma, TMA, clusters: sm_90a only */
	extern __shared__ unsigned char smem_raw[];
	const uint32_t raw = smem_u32(smem_raw);
	const uint32_t base = (raw + 1023) & ~1023u;
	unsigned char *smem = smem_raw + (base - raw);
	/* a stage; a row of the epilogue's staging tile (in the stages) */
	constexpr int stage_bytes = A_BYTES + BK * TN * 2, pitch = TN * 2 + 16;
	static_assert(BM * pitch <= STAGES * stage_bytes, "epilogue staging fits");
	const uint32_t full0 = base + STAGES * stage_bytes, empty0 = full0 + 8 * STAGES;
	const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
	/* the block's tile: with GROUP_M, launch order (x fastest) walks
	 * GROUP_M tiles down M, then the next tile across N, so that a wave's
	 * blocks read GROUP_M rows of A tiles and about a wave / GROUP_M
	 * columns of B tiles (8192^3: 16 + 8 of them, 64 MB, where the
	 * plain order reads 64 + 2, 136 MB).  Only grids of more than a wave
	 * are GROUPED: in one wave the order matters little, and there the
	 * plain kernel measured 0.5-2% faster (1000^3, 2048^3 on an H100) */
	int mi = blockIdx.x, ni = blockIdx.y;
	if constexpr (GROUPED && GROUP_M > 0) {
		const int pid = blockIdx.x + blockIdx.y * gridDim.x;
		const int per = GROUP_M * gridDim.y, g0 = pid / per * GROUP_M;
		const int gs = min((int)gridDim.x - g0, GROUP_M);

		mi = g0 + pid % per % gs;
		ni = pid % per / gs;
	}
	const int m0 = mi * BM, n0 = ni * TN;
	const int KT = (K + BK - 1) / BK;

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

	if (wg == 0) {
		/* producer */
		setmaxnreg_dec<40>();
		if (tid == 0) {
			const int rank = CM > 1 ? (int)cluster_rank() : 0;
			/* 64-column boxes of B that start inside B (the rest is
			 * never stored, so it is not loaded either) */
			const int nbox = min(TN / 64, (N - n0 + 63) / 64);

			for (int kt = 0; kt < KT; kt++) {
				const int s = kt % STAGES;
				const uint32_t fb = full0 + 8 * s;
				const uint32_t a = base + s * stage_bytes, b = a + A_BYTES;

				mbar_wait(empty0 + 8 * s, (kt / STAGES & 1) ^ 1);
				mbar_expect_tx(fb, A_BYTES + nbox * BK * 128);
				tma_load(a, &tmA, fb, kt * BK, m0);
				for (int j = rank; j < nbox; j += CM) {
					if constexpr (CM > 1)
						tma_load_mc(b + j * BK * 128, &tmB, fb,
							    n0 + 64 * j, kt * BK, (1 << CM) - 1);
					else
						tma_load(b + j * BK * 128, &tmB, fb,
							 n0 + 64 * j, kt * BK);
				}
			}
		}
	} else {
		/* consumers: rows c*64 .. c*64+63 of the tile */
		setmaxnreg_inc<232>();
		const int c = wg - 1, warp = tid / 32, lane = tid % 32;
		float acc[TN / 2];

#pragma unroll
		for (int i = 0; i < TN / 2; i++)
			acc[i] = 0.f;
		for (int kt = 0; kt < KT; kt++) {
			const int s = kt % STAGES;
			const uint32_t a = base + s * stage_bytes + c * 64 * 128;
			const uint32_t b = base + s * stage_bytes + A_BYTES;

			mbar_wait(full0 + 8 * s, kt / STAGES & 1);
			wgmma_fence();
#pragma unroll
			for (int kk = 0; kk < BK / 16; kk++) {
				/* A K-major: k16 is 32 bytes along the swizzled row.
				 * B N-major: k16 is 16 rows of 128 bytes; 64-column
				 * boxes are BK * 128 bytes apart (LBO), 8-row groups
				 * 1024 (SBO). */
				const uint64_t da = sw128_desc(a + kk * 32, 16, 1024);
				const uint64_t db = sw128_desc(b + kk * 16 * 128, BK * 128, 1024);

				if constexpr (TN == 256)
					wgmma_n256<T, 1>(acc, da, db);
				else
					wgmma_n128<T, 1>(acc, da, db);
			}
			wgmma_commit();
			wgmma_wait<1>();        /* the group of tile kt-1 retired */
			if (kt > 0 && lane == 0) {
				const uint32_t e = empty0 + 8 * ((kt - 1) % STAGES);
				if constexpr (CM > 1)
					for (int r = 0; r < CM; r++)
						mbar_arrive_cluster(e, r);
				else
					mbar_arrive(e);
			}
		}
		wgmma_wait<0>();

		/* epilogue: both consumers are done with the stages (bar 1) */
		named_bar(1, 256);
		unsigned char *stg = smem + c * 64 * pitch;
		const int r = warp * 16 + lane / 4;
#pragma unroll
		for (int i = 0; i < TN / 8; i++) {
			const int col = 8 * i + 2 * (lane % 4);
			T v0[2] = {from_f32<T>(acc[4 * i]), from_f32<T>(acc[4 * i + 1])};
			T v1[2] = {from_f32<T>(acc[4 * i + 2]), from_f32<T>(acc[4 * i + 3])};
			*(uint32_t *)(stg + r * pitch + col * 2) = *(uint32_t *)v0;
			*(uint32_t *)(stg + (r + 8) * pitch + col * 2) = *(uint32_t *)v1;
		}
		named_bar(2 + c, 128);
		for (int idx = tid; idx < 64 * (TN / 8); idx += 128) {
			const int row = idx / (TN / 8), ch = idx % (TN / 8);
			const int gm = m0 + c * 64 + row, gn = n0 + ch * 8;
			if (gm < M && gn < N)
				*(uint4 *)(C + (int64_t)gm * N + gn) =
					*(const uint4 *)(stg + row * pitch + ch * 16);
		}
	}
	/* a block's shared memory must outlive its peer's remote arrives */
	if constexpr (CM > 1)
		cluster_sync();
#endif /* sm_90a */
}

#endif /* WGMMA */

/* ---- mma.sync fallback: any K, N ---------------------------------------- */

#define FTHREADS 256            /* 8 warps, 2 x 4 */
#define FWTM (FBM / 2)
#define FWTN (FBN / 4)
#define FLDA (FBK + 8)          /* padded rows: ldmatrix without bank conflicts */
#define FLDB (FBN + 8)
#define FA_STAGE (FBM * FLDA)
#define FB_STAGE (FBK * FLDB)

static __device__ __forceinline__ void cp_async16(void *smem, const void *gmem, int bytes)
{
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
		     :: "r"(smem_u32(smem)), "l"(gmem), "r"(bytes));
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

/* Tile kt of A (FBM x FBK) and B (FBK x FBN) into one stage; zeros outside. */
template <typename T, bool VEC>
static __device__ __forceinline__ void load_tile(T *As, T *Bs, const T *A, const T *B,
						 int M, int N, int K, int m0, int n0, int k0)
{
	if constexpr (VEC) {
		for (int c = threadIdx.x; c < FBM * FBK / 8; c += FTHREADS) {
			const int r = c / (FBK / 8), k = c % (FBK / 8) * 8;
			const bool ok = m0 + r < M && k0 + k < K;
			cp_async16(As + r * FLDA + k, ok ? A + (int64_t)(m0 + r) * K + k0 + k : A,
				   ok ? 16 : 0);
		}
		for (int c = threadIdx.x; c < FBK * FBN / 8; c += FTHREADS) {
			const int r = c / (FBN / 8), n = c % (FBN / 8) * 8;
			const bool ok = k0 + r < K && n0 + n < N;
			cp_async16(Bs + r * FLDB + n, ok ? B + (int64_t)(k0 + r) * N + n0 + n : B,
				   ok ? 16 : 0);
		}
	} else {
		const T zero = from_f32<T>(0.f);
		for (int e = threadIdx.x; e < FBM * FBK; e += FTHREADS) {
			const int r = e / FBK, k = e % FBK;
			const bool ok = m0 + r < M && k0 + k < K;
			As[r * FLDA + k] = ok ? A[(int64_t)(m0 + r) * K + k0 + k] : zero;
		}
		for (int e = threadIdx.x; e < FBK * FBN; e += FTHREADS) {
			const int r = e / FBN, n = e % FBN;
			const bool ok = k0 + r < K && n0 + n < N;
			Bs[r * FLDB + n] = ok ? B[(int64_t)(k0 + r) * N + n0 + n] : zero;
		}
	}
}

static __device__ __forceinline__ void ldsm_x4(uint32_t *r, const void *p)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
		     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_u32(p)));
}

static __device__ __forceinline__ void ldsm_x4_trans(uint32_t *r, const void *p)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
		     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_u32(p)));
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

template <typename T, bool VEC>
__global__ void __launch_bounds__(FTHREADS)
gemm_mma(const T *__restrict__ A, const T *__restrict__ B, T *__restrict__ C,
	 int M, int N, int K)
{
	constexpr int FM = FWTM / 16, FN = FWTN / 16;
	extern __shared__ __align__(128) unsigned char smem[];
	T *As = (T *)smem, *Bs = As + FSTAGES * FA_STAGE;
	const int warp = threadIdx.x / 32, wm = warp / 4, wn = warp % 4;
	const int lane = threadIdx.x % 32;
	const int m0 = blockIdx.y * FBM, n0 = blockIdx.x * FBN;
	const int KT = (K + FBK - 1) / FBK;
	float acc[FM][2 * FN][4] = {};

	for (int s = 0; s < FSTAGES - 1; s++) {
		if (s < KT)
			load_tile<T, VEC>(As + s * FA_STAGE, Bs + s * FB_STAGE, A, B,
					  M, N, K, m0, n0, s * FBK);
		cp_commit();
	}
	for (int kt = 0; kt < KT; kt++) {
		cp_wait<FSTAGES - 2>();
		__syncthreads();        /* tile kt landed; stage kt-1 is free */
		const int nt = kt + FSTAGES - 1;
		if (nt < KT)
			load_tile<T, VEC>(As + nt % FSTAGES * FA_STAGE, Bs + nt % FSTAGES * FB_STAGE,
					  A, B, M, N, K, m0, n0, nt * FBK);
		cp_commit();

		const T *as = As + kt % FSTAGES * FA_STAGE +
			      (wm * FWTM + (lane & 15)) * FLDA + (lane >> 4) * 8;
		const T *bs = Bs + kt % FSTAGES * FB_STAGE + (lane & 15) * FLDB +
			      wn * FWTN + (lane >> 4) * 8;
#pragma unroll
		for (int kk = 0; kk < FBK; kk += 16) {
			uint32_t af[FM][4], bf[FN][4];
#pragma unroll
			for (int i = 0; i < FM; i++)
				ldsm_x4(af[i], as + i * 16 * FLDA + kk);
#pragma unroll
			for (int j = 0; j < FN; j++)
				ldsm_x4_trans(bf[j], bs + kk * FLDB + j * 16);
#pragma unroll
			for (int i = 0; i < FM; i++)
#pragma unroll
				for (int j = 0; j < FN; j++) {
					mma16816<T>(acc[i][2 * j], af[i], bf[j][0], bf[j][1]);
					mma16816<T>(acc[i][2 * j + 1], af[i], bf[j][2], bf[j][3]);
				}
		}
	}
	cp_wait<0>();

	const bool pair = N % 2 == 0 && ((uintptr_t)C & 3) == 0;
	const int g = lane / 4, tq = lane % 4;
#pragma unroll
	for (int i = 0; i < FM; i++)
#pragma unroll
		for (int j = 0; j < 2 * FN; j++) {
			const int m = m0 + wm * FWTM + i * 16 + g;
			const int n = n0 + wn * FWTN + j * 8 + 2 * tq;
			store2(C, M, N, m, n, acc[i][j][0], acc[i][j][1], pair);
			store2(C, M, N, m + 8, n, acc[i][j][2], acc[i][j][3], pair);
		}
}

/* ---- f16/bf16, M <= 64 (decode): split K, every row in one block -------- */

/*
 * A decode step's matmul has a few rows and a wide B: the 128-row tiles
 * above would run N/256 blocks, a fraction of the SMs, each reading B at
 * one SM's bandwidth.  Here a block computes all M rows (MG groups of 16)
 * of 128 columns over one slice of K, so N/128 x S blocks share B's read
 * and every SM streams: B is read once, A (M x K, small) from L2.  4 warps
 * own 32 columns each; mma.sync m16n8k16 with A and B through ldmatrix,
 * a SSTAGES-deep cp.async ring.  With S slices each block writes f32
 * partials to the workspace and sum_slices() adds them into C.
 */
#define SK_THREADS 128
#define SSTAGES 4
#define SK_MAX_M 64
#define SA_STAGE (SK_MAX_M * FLDA)

template <typename T, int MG>
__global__ void __launch_bounds__(SK_THREADS)
gemm_skinny(const T *__restrict__ A, const T *__restrict__ B, T *__restrict__ C,
	    float *__restrict__ part, int M, int N, int K, int tiles_per_slice)
{
	extern __shared__ __align__(128) unsigned char smem[];
	T *As = (T *)smem, *Bs = As + SSTAGES * SA_STAGE;
	const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	const int n0 = blockIdx.x * FBN;
	const int KT = (K + FBK - 1) / FBK;
	const int t0 = blockIdx.y * tiles_per_slice;
	const int nk = min(tiles_per_slice, KT - t0);
	float acc[MG][4][4] = {};

#if __CUDA_ARCH__ >= 900
	/* sum_slices may be scheduled now; it waits for this grid's end */
	asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
	auto load = [&](int stage, int kt) {
		const int k0 = kt * FBK;
		T *as = As + stage * SA_STAGE, *bs = Bs + stage * FB_STAGE;

		for (int c = threadIdx.x; c < MG * 16 * FBK / 8; c += SK_THREADS) {
			const int r = c / (FBK / 8), k = c % (FBK / 8) * 8;
			const bool ok = r < M && k0 + k < K;
			cp_async16(as + r * FLDA + k, ok ? A + (int64_t)r * K + k0 + k : A,
				   ok ? 16 : 0);
		}
		for (int c = threadIdx.x; c < FBK * FBN / 8; c += SK_THREADS) {
			const int r = c / (FBN / 8), n = c % (FBN / 8) * 8;
			const bool ok = k0 + r < K && n0 + n < N;
			cp_async16(bs + r * FLDB + n, ok ? B + (int64_t)(k0 + r) * N + n0 + n : B,
				   ok ? 16 : 0);
		}
	};

	for (int s = 0; s < SSTAGES - 1; s++) {
		if (s < nk)
			load(s, t0 + s);
		cp_commit();
	}
	for (int i = 0; i < nk; i++) {
		cp_wait<SSTAGES - 2>();
		__syncthreads();        /* tile i landed; stage i-1 is free */
		if (i + SSTAGES - 1 < nk)
			load((i + SSTAGES - 1) % SSTAGES, t0 + i + SSTAGES - 1);
		cp_commit();

		const T *as = As + i % SSTAGES * SA_STAGE + (lane & 15) * FLDA + (lane >> 4) * 8;
		const T *bs = Bs + i % SSTAGES * FB_STAGE + (lane & 15) * FLDB +
			      warp * 32 + (lane >> 4) * 8;
#pragma unroll
		for (int kk = 0; kk < FBK; kk += 16) {
			uint32_t af[MG][4], bf[2][4];
#pragma unroll
			for (int g = 0; g < MG; g++)
				ldsm_x4(af[g], as + g * 16 * FLDA + kk);
#pragma unroll
			for (int j = 0; j < 2; j++)
				ldsm_x4_trans(bf[j], bs + kk * FLDB + j * 16);
#pragma unroll
			for (int g = 0; g < MG; g++)
#pragma unroll
				for (int j = 0; j < 2; j++) {
					mma16816<T>(acc[g][2 * j], af[g], bf[j][0], bf[j][1]);
					mma16816<T>(acc[g][2 * j + 1], af[g], bf[j][2], bf[j][3]);
				}
		}
	}
	cp_wait<0>();

	const int g8 = lane / 4, tq = lane % 4;
	float *slice = part + (int64_t)blockIdx.y * M * N;
#pragma unroll
	for (int g = 0; g < MG; g++)
#pragma unroll
		for (int j = 0; j < 4; j++) {
			const int n = n0 + warp * 32 + j * 8 + 2 * tq;
#pragma unroll
			for (int h = 0; h < 2; h++) {
				const int m = g * 16 + g8 + 8 * h;

				if (m >= M || n >= N)
					continue;
				if (part)
					*reinterpret_cast<float2 *>(slice + (int64_t)m * N + n) =
						make_float2(acc[g][j][2 * h], acc[g][j][2 * h + 1]);
				else
					store2(C, M, N, m, n, acc[g][j][2 * h],
					       acc[g][j][2 * h + 1], true);
			}
		}
}

/* C = the sum of S slices of f32 partials, 4 elements a thread (N % 8 == 0).
 * On Hopper a programmatic dependent launch (PDL 1): its launch overlaps
 * gemm_skinny's run instead of following its end. */
template <typename T>
__global__ void __launch_bounds__(256)
sum_slices(const float *__restrict__ part, T *__restrict__ C, int64_t MN, int S)
{
	const int64_t e = ((int64_t)blockIdx.x * 256 + threadIdx.x) * 4;

#if __CUDA_ARCH__ >= 900
	/* launched dependent on gemm_skinny: its partials are visible after this */
	asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
	if (e >= MN)
		return;
	float4 v = *reinterpret_cast<const float4 *>(part + e);
	for (int s = 1; s < S; s++) {
		const float4 w = *reinterpret_cast<const float4 *>(part + s * MN + e);

		v.x += w.x, v.y += w.y, v.z += w.z, v.w += w.w;
	}
	T o[4] = {from_f32<T>(v.x), from_f32<T>(v.y), from_f32<T>(v.z), from_f32<T>(v.w)};
	*reinterpret_cast<uint2 *>(C + e) = *reinterpret_cast<uint2 *>(o);
}

/* ---- f32: 64x64 tile, BK 16, each thread 4x4 outputs strided by 16 ------ */

__global__ void __launch_bounds__(256)
sgemm(const float *__restrict__ A, const float *__restrict__ B,
      float *__restrict__ C, int M, int N, int K)
{
	__shared__ float As[16][64 + 4];        /* [k][m] */
	__shared__ float Bs[16][64 + 4];        /* [k][n] */
	const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
	const int m0 = blockIdx.y * 64, n0 = blockIdx.x * 64;
	float acc[4][4] = {};

	for (int k0 = 0; k0 < K; k0 += 16) {
		for (int e = threadIdx.x; e < 64 * 16; e += 256) {
			const int r = e / 16, k = e % 16;
			const bool ok = m0 + r < M && k0 + k < K;
			As[k][r] = ok ? A[(int64_t)(m0 + r) * K + k0 + k] : 0.f;
		}
		for (int e = threadIdx.x; e < 16 * 64; e += 256) {
			const int k = e / 64, n = e % 64;
			const bool ok = k0 + k < K && n0 + n < N;
			Bs[k][n] = ok ? B[(int64_t)(k0 + k) * N + n0 + n] : 0.f;
		}
		__syncthreads();
#pragma unroll
		for (int k = 0; k < 16; k++) {
			float a[4], b[4];
#pragma unroll
			for (int i = 0; i < 4; i++) {
				a[i] = As[k][ty + 16 * i];
				b[i] = Bs[k][tx + 16 * i];
			}
#pragma unroll
			for (int i = 0; i < 4; i++)
#pragma unroll
				for (int j = 0; j < 4; j++)
					acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
		}
		__syncthreads();
	}
#pragma unroll
	for (int i = 0; i < 4; i++)
#pragma unroll
		for (int j = 0; j < 4; j++) {
			const int m = m0 + ty + 16 * i, n = n0 + tx + 16 * j;
			if (m < M && n < N)
				C[(int64_t)m * N + n] = acc[i][j];
		}
}

/* ---- host --------------------------------------------------------------- */

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

template <typename T, int CM, int TN, bool GROUPED = false>
static int launch_cluster(const CUtensorMap &ta, const CUtensorMap &tb, T *C,
			  int M, int N, int K, int mt, int nt, cudaStream_t st)
{
	cudaLaunchConfig_t cfg = {};
	cudaLaunchAttribute attr[1];

	if (cudaFuncSetAttribute(gemm_wgmma<T, CM, TN, GROUPED>,
				 cudaFuncAttributeMaxDynamicSharedMemorySize,
				 WG_SMEM(TN)) != cudaSuccess)
		return -1;
	cfg.gridDim = dim3(mt, nt);
	cfg.blockDim = dim3(384);
	cfg.dynamicSmemBytes = WG_SMEM(TN);
	cfg.stream = st;
	attr[0].id = cudaLaunchAttributeClusterDimension;
	attr[0].val.clusterDim.x = CM;
	attr[0].val.clusterDim.y = 1;
	attr[0].val.clusterDim.z = 1;
	cfg.attrs = attr;
	cfg.numAttrs = 1;
	return cudaLaunchKernelEx(&cfg, gemm_wgmma<T, CM, TN, GROUPED>, ta, tb, C, M, N, K) ==
	       cudaSuccess ? 0 : -1;
}

/* 0 launched, 1 not possible here (use the fallback), -1 launch error */
template <typename T>
static int launch_wgmma(const T *A, const T *B, T *C, int M, int N, int K,
			cudaStream_t st)
{
	CUtensorMap ta, tb;
	const int mt = (M + BM - 1) / BM, nt = (N + BN - 1) / BN;

	if (nt > 65535 || !tensor_map(&ta, A, M, K, BM) || !tensor_map(&tb, B, K, N, BK))
		return 1;
	/* Tiles of 128 columns where those of 256 would fill at most half
	 * the SMs (1000^3: 32 blocks of 256 columns, 64 of 128), so that more
	 * SMs share the work; past that the wide tile's reuse wins. */
	if (NARROW && 2 * mt * nt <= sm_count())
		return launch_cluster<T, 1, BN_NARROW>(ta, tb, C, M, N, K, mt,
						       (N + BN_NARROW - 1) / BN_NARROW, st);
	/* clusters pair M tiles; an odd count runs unpaired */
	if (CLUSTER > 1 && mt % CLUSTER == 0)
		return launch_cluster<T, CLUSTER, BN>(ta, tb, C, M, N, K, mt, nt, st);
	if (GROUP_M > 0 && mt * nt > sm_count())
		return launch_cluster<T, 1, BN, true>(ta, tb, C, M, N, K, mt, nt, st);
	return launch_cluster<T, 1, BN>(ta, tb, C, M, N, K, mt, nt, st);
}

#endif /* WGMMA */

template <typename T, bool VEC>
static int launch_mma(const T *A, const T *B, T *C, int M, int N, int K, cudaStream_t st)
{
	const size_t smem = (size_t)FSTAGES * (FA_STAGE + FB_STAGE) * sizeof(T);
	dim3 grid((N + FBN - 1) / FBN, (M + FBM - 1) / FBM);

	if (grid.y > 65535)
		return -1;
	if (cudaFuncSetAttribute(gemm_mma<T, VEC>, cudaFuncAttributeMaxDynamicSharedMemorySize,
				 (int)smem) != cudaSuccess)
		return -1;
	gemm_mma<T, VEC><<<grid, FTHREADS, smem, st>>>(A, B, C, M, N, K);
	return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

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

/* The K slices of the decode path: enough blocks for two a SM, each slice
 * at least two tiles of K. */
static int skinny_slices(int N, int K)
{
	const int sms = sm_count();
	const int cols = (N + FBN - 1) / FBN, KT = (K + FBK - 1) / FBK;
	int S = (2 * sms + cols - 1) / cols;
	S = min(S, max(1, KT / 2));
	return max(S, 1);
}

static bool skinny(int M, int N, int K)
{
	return M <= SK_MAX_M && K % 8 == 0 && N % 8 == 0 && (N + FBN - 1) / FBN <= 65535;
}

template <typename T, int MG>
static int launch_skinny_mg(const T *A, const T *B, T *C, float *part, int M, int N,
			    int K, int S, cudaStream_t st)
{
	const size_t smem = (size_t)SSTAGES * (SA_STAGE + FB_STAGE) * sizeof(T);
	const int KT = (K + FBK - 1) / FBK, per = (KT + S - 1) / S;
	dim3 grid((N + FBN - 1) / FBN, (KT + per - 1) / per);

	if (cudaFuncSetAttribute(gemm_skinny<T, MG>, cudaFuncAttributeMaxDynamicSharedMemorySize,
				 (int)smem) != cudaSuccess)
		return -1;
	gemm_skinny<T, MG><<<grid, SK_THREADS, smem, st>>>(A, B, C, grid.y > 1 ? part : nullptr,
							    M, N, K, per);
	if (cudaGetLastError() != cudaSuccess)
		return -1;
	if (grid.y > 1) {
		const int64_t MN = (int64_t)M * N;
		cudaLaunchConfig_t cfg = {};
		cudaLaunchAttribute at[1];

		cfg.gridDim = dim3((unsigned)((MN / 4 + 255) / 256));
		cfg.blockDim = dim3(256);
		cfg.stream = st;
		if (PDL && have_wgmma()) {      /* Hopper */
			at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
			at[0].val.programmaticStreamSerializationAllowed = 1;
			cfg.attrs = at;
			cfg.numAttrs = 1;
		}
		if (cudaLaunchKernelEx(&cfg, sum_slices<T>, (const float *)part, C, MN,
				       (int)grid.y) != cudaSuccess)
			return -1;
	}
	return 0;
}

/* 1 when the decode path does not take this call (the caller goes on). */
template <typename T>
static int launch_skinny(const T *A, const T *B, T *C, const struct ak_args *a,
			 int M, int N, int K, cudaStream_t st)
{
	const int S = skinny_slices(N, K);
	float *part = (float *)a->workspace;

	if (S > 1 && (!part || a->workspace_size < (size_t)S * M * N * sizeof(float)))
		return 1;
	if (M <= 16)
		return launch_skinny_mg<T, 1>(A, B, C, part, M, N, K, S, st);
	if (M <= 32)
		return launch_skinny_mg<T, 2>(A, B, C, part, M, N, K, S, st);
	return launch_skinny_mg<T, 4>(A, B, C, part, M, N, K, S, st);
}

extern "C" size_t ak_workspace_size(const struct ak_args *a)
{
	const int M = (int)a->in[0].shape[0], K = (int)a->in[0].shape[1];
	const int N = (int)a->in[1].shape[1];

	if (a->in[0].dtype == AK_F32 || M == 0 || N == 0 || K == 0 || !skinny(M, N, K))
		return 0;
	const int S = skinny_slices(N, K);
	return S > 1 ? (size_t)S * M * N * sizeof(float) : 0;
}

template <typename T>
static int run(const struct ak_args *a)
{
	const int M = (int)a->in[0].shape[0], K = (int)a->in[0].shape[1];
	const int N = (int)a->in[1].shape[1];
	const T *A = (const T *)a->in[0].data, *B = (const T *)a->in[1].data;
	T *C = (T *)a->out[0].data;
	cudaStream_t st = (cudaStream_t)a->stream;

	if (M == 0 || N == 0)
		return 0;
	if (K == 0)
		return cudaMemsetAsync(C, 0, (size_t)M * N * sizeof(T), st) == cudaSuccess ? 0 : -1;
	if constexpr (sizeof(T) == 4) {
		dim3 grid((N + 63) / 64, (M + 63) / 64);
		if (grid.y > 65535)
			return -1;
		sgemm<<<grid, 256, 0, st>>>(A, B, C, M, N, K);
		return cudaGetLastError() == cudaSuccess ? 0 : -1;
	} else {
		const bool vec = K % 8 == 0 && N % 8 == 0 &&
				 (((uintptr_t)A | (uintptr_t)B | (uintptr_t)C) & 15) == 0;
		if (vec && SKINNY && skinny(M, N, K)) {
			const int rc = launch_skinny<T>(A, B, C, a, M, N, K, st);
			if (rc <= 0)
				return rc;
		}
#if WGMMA
		if (vec && have_wgmma()) {
			const int rc = launch_wgmma<T>(A, B, C, M, N, K, st);
			if (rc <= 0)
				return rc;
		}
#endif
		return vec ? launch_mma<T, true>(A, B, C, M, N, K, st)
			   : launch_mma<T, false>(A, B, C, M, N, K, st);
	}
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
