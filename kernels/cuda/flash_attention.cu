/*
 * flash_attention: o = softmax(scale q k^T, causal) v per (batch, head),
 * q, k, v, o all [B,H,S,D], f32 softmax and accumulation.
 *
 * f16/bf16, D in {64,128}, on Hopper (sm_90a): FlashAttention with wgmma.
 * A block of NWG warpgroups (128 threads each; NWG128 at D 128) owns
 * 64*NWG query rows of one (b,h), 64 per warpgroup, and walks the key
 * tiles of BKV keys up to the diagonal.  Q, K and V tiles are copied by
 * cp.async straight into the 128-byte-swizzled layout that wgmma reads
 * through shared-memory descriptors (no ldmatrix, no bank conflicts); K/V
 * are double-buffered so the next tile loads while this one is used.  Per
 * tile a warpgroup issues S = Q K^T as D/16 wgmma m64nBKVk16 (both
 * operands from shared memory), does the online softmax on the
 * accumulators (exp2 with the scale folded in, the causal mask only on the
 * diagonal tile), and issues O += P V as BKV/16 wgmma m64nDk16 with P
 * taken from registers (the accumulator layout is the A-fragment layout)
 * and V read transposed by the descriptor.  One wgmma moves 64xBKV of
 * work, against 16x8 for mma.sync, and its operands never pass through
 * registers: the tensor cores stay busy while the other warpgroups of the
 * SM do their softmax.  S never touches memory; q, k, v are read once per
 * query block, o written once.  Blocks go longest-first (last query block
 * first) for causal load balance, over groups of heads whose K and V fit
 * in L2_MB of L2 (block_work(); on an H200, 8x32x512x128 86.78 -> 84.16
 * us and 1x32x4096x128 264.67 -> 258.21, f16).
 *
 * At D 128 (WS 1), and at D 64 with WS64, flash_ws runs instead,
 * FlashAttention-3's layout: a TMA producer warpgroup and two consumer
 * warpgroups that each overlap tile t+1's softmax with tile t's P V (see
 * its comment); with PERSIST, up to PERSIST_S keys, one block a
 * multiprocessor walking its items, the next item's loads under this
 * one's end.  Judged by the hook on
 * an H100 at issue 20's shapes (f16): 1x32x4096x128 378.2 -> 275.1 us (SDPA
 * 266.5 in the same session), 8x32x512x128 101.7 -> 97.0 (SDPA 61.0: short
 * rows, where each block's start and end are not yet hidden); then PERSIST
 * and WS64 (session 22, H100, 5.2% over the workload): 2x32x1024x64 38.91
 * -> 35.94, 4x16x2048x64 111.84 -> 104.58, 8x32x512x128 94.14 -> 88.93,
 * 1x32x4096x128 261.98 -> 259.01.  Persistent where all heads' K and V
 * exceed L2, its head groups are L2_MB_WS (ws_groups(); session 24, H100,
 * 2.1% over the workload: 8x32x512x128 89.60 -> 82.21, the rest level).
 * With STREAM at D 128 a block's items run as one stream of tiles (session
 * 26, H100: 8x32x512x128 76.83 -> 70.56 us).
 *
 * Other f16/bf16 D in {16,32} (or no sm_90a, or unaligned data): the
 * FlashAttention-2 kernel on mma.sync m16n8k16 (16 query rows per warp).
 * f32, or any other D (up to 256): a simple SIMT kernel, one warp per query
 * row, lanes split D, online softmax over the keys it may see.
 */
#include <cuda_runtime.h>
#include <cudaTypedefs.h>       /* CUtensorMap and the encoder's type; no libcuda link */
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>
#include <type_traits>
#include "autokernel.h"

#define NWG 2      /* autokernel: tune 2,3 */
#define NWG128 3   /* autokernel: tune 1,2,3 (3 kept on an H100: 8x32x512x128 108.4 -> 102.3 us) */
#define BKV 64    /* autokernel: tune 64,128 */
#define WS 1       /* autokernel: tune 0,1 (1: flash_ws at D 128) */
#define PINGPONG 1 /* autokernel: tune 0,1 (flash_ws's consumers take turns issuing; 0 was even on an H100) */
#define WS_TILE 128             /* flash_ws: query and key rows a tile */
#define L2_MB 32   /* autokernel: tune 0,8,16,32 (K and V of a group of heads, 0: no groups) */
#define L2_MB_WS 16 /* autokernel: tune 8,16,32 (L2_MB for the persistent flash_ws where all heads' K and V exceed L2) */
#define WS_EVEN 1  /* autokernel: tune 0,1 (persistent groups a whole number of snake pass pairs: H100 8x32x512x128 81.7 -> 76.5 us) */
#define PERSIST 1  /* autokernel: tune 0,1 (flash_ws: one block an SM walks its items, the next one's loads under this one's end) */
#define PERSIST_S 2048 /* autokernel: tune 1024,2048,1073741824 (PERSIST up to this sequence length: on an H100 1x32x4096x128 took 8% longer persistent) */
#define WS64 1     /* autokernel: tune 0,1 (1: flash_ws at D 64 too) */
#define STREAM 1   /* autokernel: tune 0,1 (persistent flash_ws at D 128: the next item's first scores issued with this one's last P V; H100 8x32x512x128 76.8 -> 70.6 us) */

#define MMA_WARPS 4             /* mma.sync path: warps per block */
#define MMA_BKV 64              /* mma.sync path: keys per tile */
#define MMA_BQ (16 * MMA_WARPS)
#define SIMT_WARPS 8            /* fallback: query rows per block */

static __device__ __forceinline__ float to_f32(float x) { return x; }
static __device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }
static __device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> static __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_f32<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

/* Two floats as one register of two T, lo in the low half. */
template <typename T>
static __device__ __forceinline__ uint32_t pack2(float lo, float hi)
{
	if constexpr (std::is_same_v<T, __half>) {
		__half2 h = __floats2half2_rn(lo, hi);
		return *reinterpret_cast<uint32_t *>(&h);
	} else {
		__nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
		return *reinterpret_cast<uint32_t *>(&h);
	}
}

static __device__ __forceinline__ float ex2(float x)
{
	float y;
	asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
	return y;
}

static __device__ __forceinline__ void cp_async16(void *smem, const void *gmem,
						  int bytes)
{
	unsigned s = (unsigned)__cvta_generic_to_shared(smem);
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
		     :: "r"(s), "l"(gmem), "r"(bytes) : "memory");
}

static __device__ __forceinline__ void cp_commit(void)
{
	asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int N>
static __device__ __forceinline__ void cp_wait(void)
{
	asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory");
}

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

/* 3-D tile at (c0 = inner, c1, c2 = outer) into shared memory; completes on bar. */
static __device__ __forceinline__ void tma_load3(uint32_t dst, const CUtensorMap *map,
						 uint32_t bar, int c0, int c1, int c2)
{
	asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
		     " [%0], [%1, {%3, %4, %5}], [%2];"
		     :: "r"(dst), "l"((uint64_t)map), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
		     : "memory");
}

/* ------------------------------------------------------------------ */
/* wgmma (sm_90a)                                                      */

template <int N> struct wg_acc { float r[N / 2]; };   /* m64nN, per thread */

/* The wgmma instructions as inline asm, the dtype (TY: "f16" or "bf16")
 * their one difference between the two forms each is used in. */
#define WGMMA_SS_N64(TY) \
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n" \
		     "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " " \
		     "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1, 0, 0;\n}\n" \
		: "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
		  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
		  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
		  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]) \
		: "l"(da), "l"(db), "r"(acc))

static __device__ __forceinline__ void wgmma_ss(wg_acc<64> &a, uint64_t da, uint64_t db, int acc, __half)
{
	float *d = a.r;
	WGMMA_SS_N64("f16");
}

#define WGMMA_RS_N64(TY) \
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n" \
		     "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " " \
		     "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, {%32,%33,%34,%35}, %36, p, 1, 1, 1;\n}\n" \
		: "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
		  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
		  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
		  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]) \
		: "r"(p[0]), "r"(p[1]), "r"(p[2]), "r"(p[3]), "l"(db), "r"(1))

static __device__ __forceinline__ void wgmma_rs(wg_acc<64> &a, const uint32_t *p, uint64_t db, __half)
{
	float *d = a.r;
	WGMMA_RS_N64("f16");
}

static __device__ __forceinline__ void wgmma_ss(wg_acc<64> &a, uint64_t da, uint64_t db, int acc, __nv_bfloat16)
{
	float *d = a.r;
	WGMMA_SS_N64("bf16");
}
static __device__ __forceinline__ void wgmma_rs(wg_acc<64> &a, const uint32_t *p, uint64_t db, __nv_bfloat16)
{
	float *d = a.r;
	WGMMA_RS_N64("bf16");
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

static __device__ __forceinline__ void wgmma_ss(wg_acc<128> &a, uint64_t da, uint64_t db, int acc, __half)
{
	float *d = a.r;
	constexpr int TB = 0;      /* K is [key][d]: B K-major */

	WGMMA_N128("f16", acc);
}

#define WGMMA_RS_N128(TY) \
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n" \
		     "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " " \
		     "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, {%64,%65,%66,%67}, %68, p, 1, 1, 1;\n}\n" \
		: "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
		  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
		  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
		  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
		  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
		  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
		  "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
		  "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]) \
		: "r"(p[0]), "r"(p[1]), "r"(p[2]), "r"(p[3]), "l"(db), "r"(1))

static __device__ __forceinline__ void wgmma_rs(wg_acc<128> &a, const uint32_t *p, uint64_t db, __half)
{
	float *d = a.r;
	WGMMA_RS_N128("f16");
}

static __device__ __forceinline__ void wgmma_ss(wg_acc<128> &a, uint64_t da, uint64_t db, int acc, __nv_bfloat16)
{
	float *d = a.r;
	constexpr int TB = 0;      /* K is [key][d]: B K-major */

	WGMMA_N128("bf16", acc);
}
static __device__ __forceinline__ void wgmma_rs(wg_acc<128> &a, const uint32_t *p, uint64_t db, __nv_bfloat16)
{
	float *d = a.r;
	WGMMA_RS_N128("bf16");
}

/* Keep the compiler from touching accumulators before the wgmma wait. */
template <int N>
static __device__ __forceinline__ void fence_acc(wg_acc<N> &a)
{
#pragma unroll
	for (int i = 0; i < N / 2; i++)
		asm volatile("" : "+f"(a.r[i]) :: "memory");
}

/*
 * The 128-byte swizzle (sw128_desc): rows of 128 bytes (64 b16), 16-byte
 * chunk c of row r stored at chunk c ^ (r % 8), atoms of 8 rows (1024
 * bytes, 1024-aligned) 1024 bytes apart (the stride offset).  The leading
 * offset is the distance between 64-column slabs where an operand is wider
 * than 64 along its contiguous dimension (V for D = 128).
 */

/*
 * S = Q K^T issued, not waited for: D/16 wgmma m64nNk16, both operands in
 * shared memory (K is [key][d], i.e. B K-major).  dq addresses the
 * warpgroup's 64 rows in Q's slabs of BQ rows, dk a tile's slabs of N rows.
 */
template <typename T, int D, int BQ, int N>
static __device__ __forceinline__ void issue_qk(wg_acc<N> &sacc, uint64_t dq, uint64_t dk)
{
#pragma unroll
	for (int kk = 0; kk < D / 16; kk++)
		wgmma_ss(sacc, dq + ((kk / 4 * BQ * 128 + kk % 4 * 32) >> 4),
			 dk + ((kk / 4 * N * 128 + kk % 4 * 32) >> 4), kk > 0, T());
}

/* O += P V issued: N/16 wgmma m64nDk16, P from registers, V ([key][d], i.e.
 * B MN-major) read transposed through dv (its slabs leading-offset apart). */
template <typename T, int N, int D>
static __device__ __forceinline__ void issue_pv(wg_acc<D> &oacc, const uint32_t (*pa)[4],
						uint64_t dv)
{
#pragma unroll
	for (int kv = 0; kv < N / 16; kv++)
		wgmma_rs(oacc, pa[kv], dv + (kv * 16 * 128 >> 4), T());
}

/* Keep the compiler off registers a wgmma in flight still reads. */
template <int N>
static __device__ __forceinline__ void fence_regs(uint32_t (*pa)[4])
{
#pragma unroll
	for (int i = 0; i < N / 16; i++)
#pragma unroll
		for (int j = 0; j < 4; j++)
			asm volatile("" : "+r"(pa[i][j]) :: "memory");
}

/*
 * The softmax of one 64 x N score tile of a warpgroup, in the wgmma
 * accumulator layout (thread: rows row_a and row_b = row_a + 8, columns
 * 8 nt + 2 tq + {0, 1}): scaled to log2 units, masked where the tile
 * crosses the warpgroup's diagonal (its first row r0) or the end of the
 * keys, the running max (m) and sums (l) updated, P = exp2(S - max) in
 * place, and al the factor the rows' earlier partials are rescaled by.
 */
template <int N>
static __device__ __forceinline__ void softmax_tile(float *s, int j0, int r0,
						    int row_a, int row_b, int S,
						    float sl2, float &m_a, float &m_b,
						    float &l_a, float &l_b,
						    float &al_a, float &al_b)
{
	constexpr int NT = N / 8;
	const int tq = threadIdx.x % 4;

	if (j0 + N - 1 > r0 || j0 + N > S) {
#pragma unroll
		for (int nt = 0; nt < NT; nt++) {
			const int j = j0 + nt * 8 + 2 * tq;
#pragma unroll
			for (int e = 0; e < 4; e++) {
				const int key = j + (e & 1), row = e < 2 ? row_a : row_b;
				s[nt * 4 + e] = key <= row && key < S ? s[nt * 4 + e] * sl2 : -INFINITY;
			}
		}
	} else {
#pragma unroll
		for (int i = 0; i < N / 2; i++)
			s[i] *= sl2;
	}
	float mx_a = m_a, mx_b = m_b;
#pragma unroll
	for (int nt = 0; nt < NT; nt++) {
		mx_a = fmaxf(mx_a, fmaxf(s[nt * 4], s[nt * 4 + 1]));
		mx_b = fmaxf(mx_b, fmaxf(s[nt * 4 + 2], s[nt * 4 + 3]));
	}
#pragma unroll
	for (int off = 1; off < 4; off *= 2) {
		mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, off));
		mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, off));
	}
	/* a row with nothing unmasked yet keeps max -inf: exp2 of 0 offsets */
	const float mu_a = mx_a == -INFINITY ? 0.f : mx_a;
	const float mu_b = mx_b == -INFINITY ? 0.f : mx_b;
	float ls_a = 0.f, ls_b = 0.f;

	al_a = ex2(m_a - mu_a);
	al_b = ex2(m_b - mu_b);
	m_a = mx_a;
	m_b = mx_b;
#pragma unroll
	for (int nt = 0; nt < NT; nt++) {
		s[nt * 4] = ex2(s[nt * 4] - mu_a);
		s[nt * 4 + 1] = ex2(s[nt * 4 + 1] - mu_a);
		s[nt * 4 + 2] = ex2(s[nt * 4 + 2] - mu_b);
		s[nt * 4 + 3] = ex2(s[nt * 4 + 3] - mu_b);
		ls_a += s[nt * 4] + s[nt * 4 + 1];
		ls_b += s[nt * 4 + 2] + s[nt * 4 + 3];
	}
	l_a = l_a * al_a + ls_a;
	l_b = l_b * al_b + ls_b;
}

/* The output accumulators' rows scaled (row_a's by al_a, row_b's by al_b). */
template <int D>
static __device__ __forceinline__ void rescale(wg_acc<D> &oacc, float al_a, float al_b)
{
#pragma unroll
	for (int dt = 0; dt < D / 8; dt++) {
		oacc.r[dt * 4] *= al_a;
		oacc.r[dt * 4 + 1] *= al_a;
		oacc.r[dt * 4 + 2] *= al_b;
		oacc.r[dt * 4 + 3] *= al_b;
	}
}

/* P as the A operand of P V from registers: the accumulator layout of
 * m64nNk16 is the A-fragment layout, 16 keys (8 floats) a fragment. */
template <typename T, int N>
static __device__ __forceinline__ void pack_p(uint32_t (*pa)[4], const float *s)
{
#pragma unroll
	for (int kv = 0; kv < N / 16; kv++) {
		pa[kv][0] = pack2<T>(s[8 * kv], s[8 * kv + 1]);
		pa[kv][1] = pack2<T>(s[8 * kv + 2], s[8 * kv + 3]);
		pa[kv][2] = pack2<T>(s[8 * kv + 4], s[8 * kv + 5]);
		pa[kv][3] = pack2<T>(s[8 * kv + 6], s[8 * kv + 7]);
	}
}

/* O's rows row_a and row_b of one (b,h) slice (o), divided by the row
 * sums (the quad's partials summed), rows >= S not stored. */
template <typename T, int D>
static __device__ __forceinline__ void store_o(T *o, const wg_acc<D> &oacc,
					       float l_a, float l_b, int row_a,
					       int row_b, int S, int tq)
{
#pragma unroll
	for (int off = 1; off < 4; off *= 2) {
		l_a += __shfl_xor_sync(0xffffffffu, l_a, off);
		l_b += __shfl_xor_sync(0xffffffffu, l_b, off);
	}
	const float inv_a = 1.f / l_a, inv_b = 1.f / l_b;
#pragma unroll
	for (int dt = 0; dt < D / 8; dt++) {
		const int col = dt * 8 + 2 * tq;
		if (row_a < S)
			*(uint32_t *)(o + (int64_t)row_a * D + col) =
				pack2<T>(oacc.r[dt * 4] * inv_a, oacc.r[dt * 4 + 1] * inv_a);
		if (row_b < S)
			*(uint32_t *)(o + (int64_t)row_b * D + col) =
				pack2<T>(oacc.r[dt * 4 + 2] * inv_b, oacc.r[dt * 4 + 3] * inv_b);
	}
}

/*
 * Rows r0 .. r0+ROWS-1 (D wide) of one (b,h) slice into the swizzled
 * layout: slab s (columns 64s .. 64s+63) at dst + s*ROWS*128, row r at
 * +r*128.  Rows >= S are zero-filled.
 */
template <typename T, int D, int ROWS, int W>
static __device__ __forceinline__ void load_sw128(unsigned char *dst,
						  const T *src, int r0, int S)
{
	constexpr int CPR = D / 8, N = ROWS * CPR, NT = 128 * W;
#pragma unroll
	for (int i = 0; i < (N + NT - 1) / NT; i++) {
		const int c = threadIdx.x + i * NT;
		if (N % NT == 0 || c < N) {
			const int r = c / CPR, cc = c % CPR;
			const bool ok = r0 + r < S;
			cp_async16(dst + (cc / 8) * ROWS * 128 + r * 128 +
					   ((cc % 8 ^ r % 8) << 4),
				   ok ? src + (int64_t)(r0 + r) * D + cc * 8 : src,
				   ok ? 16 : 0);
		}
	}
}

/*
 * Block b's query block (x) and (b,h) (y).  The heads go in groups of G
 * (heads_per_group) and, within a group, the longest query blocks first
 * over the group's heads: the blocks that read one head's K and V run
 * close together, while its K and V are still in L2, and the causal work
 * still ends evenly.  With one group (G >= BH) this is the plain order,
 * last query block first over all heads, which at 8x32x512x128 reads each
 * head's K and V from memory up to four times.
 */
static __device__ __forceinline__ int2 block_work(int b, int nq, int BH, int G)
{
	if (G >= BH)            /* one group: the plain order, as cheap as before */
		return make_int2(nq - 1 - b / BH, b % BH);
	const int g0 = b / (G * nq) * G, r = b - g0 * nq, n = min(G, BH - g0);

	return make_int2(nq - 1 - r / n, g0 + r % n);
}

/* Heads whose K and V together fit in mb MiB (at least one; BH when mb
 * is 0). */
static int heads_per_group(int BH, int S, int D, int elem, int mb)
{
	const int64_t kv = 2 * (int64_t)S * D * elem;
	const int64_t g = mb ? ((int64_t)mb << 20) / kv : BH;

	return (int)(g < 1 ? 1 : g > BH ? BH : g);
}

#define NSTAGE 2

/* W warpgroups a block: NWG for D 64, NWG128 for D 128, tuned apart (on
 * an H100, 3 at D 128 beat 2; 1, two blocks an SM, was slower at S 512) */
template <int D> constexpr int wgs(void) { return D == 128 ? NWG128 : NWG; }

template <typename T, int D, int W = wgs<D>()>
__global__ void __launch_bounds__(128 * W, W == 1 || (W == 2 && D == 64) ? 2 : 1)
flash_wg(const T *__restrict__ q, const T *__restrict__ k,
	 const T *__restrict__ v, T *__restrict__ o, int BH, int S, int G, float scale)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
	constexpr int BQ = 64 * W, QB = D / 64 * BQ * 128, KB = D / 64 * BKV * 128;
	extern __shared__ __align__(1024) unsigned char smem_raw[];
	const uint32_t raw = (uint32_t)__cvta_generic_to_shared(smem_raw);
	unsigned char *Qs = smem_raw + ((1024 - (raw & 1023)) & 1023);
	unsigned char *Ks = Qs + QB, *Vs = Ks + 2 * KB;
	const uint32_t qs = (uint32_t)__cvta_generic_to_shared(Qs);
	/* Descriptors: the address field is the low 14 bits, in 16-byte
	 * units, so an offset is added to a base descriptor. */
	const uint64_t dq0 = sw128_desc(qs + threadIdx.x / 128 * 64 * 128, 16, 1024);
	const uint64_t dk0 = sw128_desc(qs + QB, 16, 1024);
	const uint64_t dv0 = sw128_desc(qs + QB + 2 * KB, BKV * 128, 1024);
	const int wg = threadIdx.x / 128, warp = threadIdx.x / 32 % 4;
	const int lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
	const int nq = (S + BQ - 1) / BQ;
	const int2 w = block_work(blockIdx.x, nq, BH, G);
	const int qb = w.x, bh = w.y;
	const int q0 = qb * BQ, r0 = q0 + 64 * wg;
	const int row_a = r0 + 16 * warp + g, row_b = row_a + 8;
	const int64_t base = (int64_t)bh * S * D;
	const int kv_end = min(S, q0 + BQ), ntiles = (kv_end + BKV - 1) / BKV;
	const float sl2 = scale * 1.4426950408889634f;  /* scale * log2(e) */
	float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.f, l_b = 0.f;
	wg_acc<D> oacc;

#pragma unroll
	for (int i = 0; i < D / 2; i++)
		oacc.r[i] = 0.f;
	load_sw128<T, D, BQ, W>(Qs, q + base, q0, S);
	load_sw128<T, D, BKV, W>(Ks, k + base, 0, S);
	load_sw128<T, D, BKV, W>(Vs, v + base, 0, S);
	cp_commit();
	for (int t = 0; t < ntiles; t++) {
		const int j0 = t * BKV, st = t & 1;

		if (t + 1 < ntiles) {
			load_sw128<T, D, BKV, W>(Ks + (st ^ 1) * KB, k + base, j0 + BKV, S);
			load_sw128<T, D, BKV, W>(Vs + (st ^ 1) * KB, v + base, j0 + BKV, S);
		}
		cp_commit();
		cp_wait<1>();           /* tile t (and Q) landed */
		asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
		__syncthreads();
		if (r0 < S && j0 <= r0 + 63) {  /* warpgroup-uniform */
			wg_acc<BKV> sacc;

			/* S = Q K^T: K is [key][d], i.e. B K-major. */
			const uint64_t dk = dk0 + (st * KB >> 4);
			wgmma_fence();
			issue_qk<T, D, BQ>(sacc, dq0, dk);
			wgmma_commit();
			wgmma_wait<0>();
			fence_acc(sacc);

			float al_a, al_b;
			softmax_tile<BKV>(sacc.r, j0, r0, row_a, row_b, S, sl2, m_a, m_b,
					  l_a, l_b, al_a, al_b);
			rescale(oacc, al_a, al_b);

			/* O += P V: V is [key][d], i.e. B MN-major (transposed). */
			uint32_t pa[BKV / 16][4];
			pack_p<T, BKV>(pa, sacc.r);
			const uint64_t dv = dv0 + (st * KB >> 4);
			wgmma_fence();
			issue_pv<T, BKV>(oacc, pa, dv);
			wgmma_commit();
			wgmma_wait<0>();
			fence_acc(oacc);
		}
		__syncthreads();        /* stage st is free for tile t+2 */
	}

	store_o<T, D>(o + base, oacc, l_a, l_b, row_a, row_b, S, tq);
#endif
}

/* The item after this one, where a flash_ws consumer's last tile of an
 * item issues its first scores (STREAM): its Q (descriptor, buffer's full
 * barrier and phase) and the rows its first tile is masked for. */
struct ws_next { uint64_t dq; uint32_t full_q, q_ph; int r0, row_a, row_b; };

/*
 * One tile t of a flash_ws consumer (the block's g-th, which names its
 * stage and phase), P(t) in pa: S' = Q K(t+1) and
 * O += P V(t) issued together (MORE: there is a tile t+1), tile t+1's
 * softmax while P V(t) runs, then O rescaled and P(t+1) packed.  The last
 * tile is its own instance, so no wgmma sits on a divergent path (ptxas
 * would serialize them).  NEW: tile t is its item's last and the next
 * tile the first of the next item (nxi): the scores are that item's, its
 * softmax starts afresh (this item's row sums left in lo[0] and lo[1])
 * and O, once P V(t) is done, is this item's whole output, not rescaled.
 */
template <typename T, int D, bool MORE, bool NEW = false>
static __device__ __forceinline__ void
ws_step(int t, int g, int c, int r0, int row_a, int row_b, int S, float sl2, uint64_t dq,
	uint64_t dk0, uint64_t dv0, uint32_t full_k, uint32_t full_v, uint32_t empty_k,
	uint32_t empty_v, wg_acc<D> &oacc, wg_acc<WS_TILE> &sacc,
	uint32_t (*pa)[4], float &m_a, float &m_b, float &l_a, float &l_b,
	const ws_next &nxi = ws_next{}, float *lo = nullptr)
{
	constexpr int TK = WS_TILE, KB = D / 64 * TK * 128;
	const int st = g & 1, nx = st ^ 1, lane = threadIdx.x % 32;
	float al_a, al_b;

	if (NEW)
		mbar_wait(nxi.full_q, nxi.q_ph);
	if (MORE)
		mbar_wait(full_k + 8 * nx, (g + 1) >> 1 & 1);
	mbar_wait(full_v + 8 * st, g >> 1 & 1);
	if (PINGPONG)
		named_bar(1 + c, 256);
	wgmma_fence();
	if (MORE) {
		issue_qk<T, D, WS_TILE>(sacc, NEW ? nxi.dq : dq, dk0 + (nx * KB >> 4));
		wgmma_commit();
	}
	issue_pv<T, TK>(oacc, pa, dv0 + (st * KB >> 4));
	wgmma_commit();
	/* the other's turn; the second consumer's last turn of an item has
	 * no answer to wait for (its arrival at the next item's start stands
	 * in for it; with STREAM only a block's last item ends so) */
	if (PINGPONG && (MORE || c == 0))
		named_arrive(2 - c, 256);
	if (MORE) {
		wgmma_wait<1>();        /* S' = Q K(t+1) done */
		fence_acc(sacc);
		if (lane == 0)
			mbar_arrive(empty_k + 8 * nx);
		if (NEW) {
			lo[0] = l_a;
			lo[1] = l_b;
			m_a = m_b = -INFINITY;
			l_a = l_b = 0.f;
			softmax_tile<TK>(sacc.r, 0, nxi.r0, nxi.row_a, nxi.row_b, S, sl2,
					 m_a, m_b, l_a, l_b, al_a, al_b);
		} else {
			softmax_tile<TK>(sacc.r, (t + 1) * TK, r0, row_a, row_b, S, sl2,
					 m_a, m_b, l_a, l_b, al_a, al_b);
		}
	}
	wgmma_wait<0>();                /* O += P V(t) done */
	fence_acc(oacc);
	fence_regs<TK>(pa);
	if (lane == 0)
		mbar_arrive(empty_v + 8 * st);
	if (MORE) {
		if (!NEW)
			rescale(oacc, al_a, al_b);
		pack_p<T, TK>(pa, sacc.r);
	}
}

/*
 * flash_ws: the warp-specialized form at D 128 (WS 1; at D 64 too with
 * WS64), as FlashAttention-3 lays it out.  A block of three warpgroups
 * owns 128 query rows of one (b,h) at a time: an item.  Warpgroup 0 is the
 * producer: one thread issues TMA copies of the item's Q tile (into one of
 * NQS buffers) and of its 128-key K and V tiles (3-D tensor maps over [BH,
 * S, D], so rows past S are zero-filled per head) into two stages each, a
 * K or V stage refilled as soon as both consumers' wgmma that read it
 * retired (its "empty" mbarrier).  Warpgroups 1 and 2 own 64 query rows
 * each and overlap their own work: with P of tile t in registers, a
 * consumer issues S' = Q K(t+1) and O += P V(t) together, does tile t+1's
 * softmax while P V(t) still runs, then rescales O and packs P(t+1).  With
 * PINGPONG the two consumers take turns issuing (two named barriers), so
 * one's softmax runs while the other's wgmma hold the tensor cores.  The
 * block's query and key tiles are both 128 wide, so both consumers walk
 * the same tiles (the diagonal one last) and only that tile, or one
 * crossing S, is masked.  setmaxnreg: 240 registers a consumer thread, 24
 * the producer's.
 *
 * With PERSIST the grid is one block a multiprocessor and a block walks
 * items (snake_item()) rather than owning one: the K/V ring's stages and
 * phases run on across items (g counts the block's tiles), so the producer
 * loads the next item's Q and first tiles while the consumers finish this
 * one's last P V and store O.  Without it a block's start (Q and the first
 * K from memory, the first scores alone) and end (the last P V alone, the
 * store) are exposed once an item: at 512 keys an item has one to four
 * tiles (on an H200, 8x32x512x128 took 84 us where the steady state of
 * 1x32x4096x128, 2.0 us a tile of a multiprocessor, would give 39).
 */
#define NQS (PERSIST ? 2 : 1)   /* flash_ws: Q buffers */

/* The k-th item of block b of P: round k goes over the blocks forwards
 * when even, backwards when odd, so block_work's longest-first list is
 * dealt out as a greedy schedule would (at most a tile a block off it at
 * issue 20's shapes, where plain round-robin was 12% off at
 * 1x32x4096x128). */
static __device__ __forceinline__ int snake_item(int k, int b, int P)
{
	return k * P + (k & 1 ? P - 1 - b : b);
}

/* This block's n-th item: its first query row, (b,h) and tiles (0 when
 * the block has no n-th); producer and consumers walk the same list. */
struct ws_item { int q0, bh, ntiles; };

static __device__ __forceinline__ ws_item ws_item_at(int n, int nq, int BH, int G, int S)
{
	const int it = snake_item(n, blockIdx.x, gridDim.x);

	if (it >= BH * nq)
		return ws_item{0, 0, 0};
	const int2 w = block_work(it, nq, BH, G);
	const int q0 = w.x * WS_TILE;

	return ws_item{q0, w.y, (min(S, q0 + WS_TILE) + WS_TILE - 1) / WS_TILE};
}

/* The producer's fill of one buffer: wait until the consumers have freed
 * it (phase free_ph of empty), then D/64 TMA boxes of 64 columns at rows
 * row.. of (b,h) bh, stride bytes apart, completing bytes on full. */
template <int D>
static __device__ __forceinline__ void ws_load(uint32_t dst, uint32_t stride,
					       const CUtensorMap *map, uint32_t empty,
					       uint32_t full, uint32_t free_ph,
					       uint32_t bytes, int row, int bh)
{
	mbar_wait(empty, free_ph);
	mbar_expect_tx(full, bytes);
#pragma unroll
	for (int s = 0; s < D / 64; s++)
		tma_load3(dst + s * stride, map, full, 64 * s, row, bh);
}

/*
 * A flash_ws consumer's item start where nothing runs under it: O zeroed,
 * tile 0's scores (Q of buffer qst, K of the block's g-th tile) issued
 * and waited for, their softmax from a fresh state, P packed.
 */
template <typename T, int D>
static __device__ __forceinline__ void
ws_first(int g, int n, int qst, int r0, int row_a, int row_b, int S, float sl2,
	 uint64_t dq, uint64_t dk0, uint32_t full_q, uint32_t full_k, uint32_t empty_k,
	 wg_acc<D> &oacc, wg_acc<WS_TILE> &sacc, uint32_t (*pa)[4], float &m_a, float &m_b,
	 float &l_a, float &l_b)
{
	constexpr int TK = WS_TILE, KB = D / 64 * TK * 128;
	float al_a, al_b;

#pragma unroll
	for (int i = 0; i < D / 2; i++)
		oacc.r[i] = 0.f;
	m_a = m_b = -INFINITY;
	l_a = l_b = 0.f;
	mbar_wait(full_q + 8 * qst, n / NQS & 1);
	mbar_wait(full_k + 8 * (g & 1), g >> 1 & 1);
	wgmma_fence();
	issue_qk<T, D, TK>(sacc, dq, dk0 + ((g & 1) * KB >> 4));
	wgmma_commit();
	wgmma_wait<0>();
	fence_acc(sacc);
	if (threadIdx.x % 32 == 0)
		mbar_arrive(empty_k + 8 * (g & 1));
	softmax_tile<TK>(sacc.r, 0, r0, row_a, row_b, S, sl2, m_a, m_b, l_a, l_b, al_a, al_b);
	pack_p<T, TK>(pa, sacc.r);
}

template <typename T, int D>
__global__ void __launch_bounds__(384, 1)
flash_ws(const __grid_constant__ CUtensorMap tmq, const __grid_constant__ CUtensorMap tmk,
	 const __grid_constant__ CUtensorMap tmv, T *__restrict__ o, int BH, int S,
	 int G, float scale)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
	constexpr int BQ = WS_TILE, TK = WS_TILE;   /* query rows, keys a tile */
	constexpr int QB = D / 64 * BQ * 128, KB = D / 64 * TK * 128;
	extern __shared__ __align__(1024) unsigned char smem_raw[];
	const uint32_t raw = (uint32_t)__cvta_generic_to_shared(smem_raw);
	const uint32_t qs = (raw + 1023) & ~1023u, ks = qs + NQS * QB, vs = ks + 2 * KB;
	/* mbarriers, two each: Q full and empty (a buffer each), K full, V
	 * full, K empty, V empty (a stage each) */
	const uint32_t full_q = vs + 2 * KB, empty_q = full_q + 16, full_k = empty_q + 16;
	const uint32_t full_v = full_k + 16, empty_k = full_v + 16, empty_v = empty_k + 16;
	const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
	const int nq = (S + BQ - 1) / BQ;

	if (threadIdx.x == 0) {
		for (int s = 0; s < 2; s++) {
			mbar_init(full_q + 8 * s, 1);
			mbar_init(empty_q + 8 * s, 8);  /* every consumer warp */
			mbar_init(full_k + 8 * s, 1);
			mbar_init(full_v + 8 * s, 1);
			mbar_init(empty_k + 8 * s, 8);
			mbar_init(empty_v + 8 * s, 8);
		}
		asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
	}
	__syncthreads();

	if (wg == 0) {
		setmaxnreg_dec<24>();
		if (tid == 0) {
			int g = 0;      /* K/V tiles issued so far */

			for (int n = 0;; n++) {
				const ws_item w = ws_item_at(n, nq, BH, G, S);
				const int q0 = w.q0, bh = w.bh, ntiles = w.ntiles;
				const int qst = n % NQS;

				if (!ntiles)
					break;

				ws_load<D>(qs + qst * QB, BQ * 128, &tmq, empty_q + 8 * qst,
					   full_q + 8 * qst, (n / NQS & 1) ^ 1, QB, q0, bh);
				for (int t = 0; t < ntiles; t++, g++) {
					const int st = g & 1;
					const uint32_t free_ph = (g >> 1 & 1) ^ 1;

					ws_load<D>(ks + st * KB, TK * 128, &tmk, empty_k + 8 * st,
						   full_k + 8 * st, free_ph, KB, t * TK, bh);
					ws_load<D>(vs + st * KB, TK * 128, &tmv, empty_v + 8 * st,
						   full_v + 8 * st, free_ph, KB, t * TK, bh);
				}
			}
		}
		return;
	}

	setmaxnreg_inc<240>();
	const int c = wg - 1, warp = tid / 32, lane = tid % 32;
	const float sl2 = scale * 1.4426950408889634f;  /* scale * log2(e) */
	const uint64_t dk0 = sw128_desc(ks, 16, 1024), dv0 = sw128_desc(vs, TK * 128, 1024);
	/*
	 * STREAM (a persistent grid, two Q buffers; D 128): the block's items
	 * as one run of tiles.  An item's last tile issues the next item's
	 * first scores with its own last P V, and their softmax runs under it,
	 * so no item after the block's first starts with its scores and
	 * softmax alone (at 512 keys an item has one to four tiles).  The
	 * pingpong turns run on across items too.  Judged on an H100
	 * (session 26, f16, 1.9% over the workload): 8x32x512x128 76.83 ->
	 * 70.56 us, the rest level.  The loop below is the one without it,
	 * kept as it was: rewritten in place for both, D 64's code changed
	 * and 4x16x2048x64 lost 2.7-4%.
	 */
	if constexpr (STREAM && D == 128 && NQS > 1) {
		int g = 0;      /* K/V tiles consumed so far */
		ws_item w = ws_item_at(0, nq, BH, G, S);
		float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.f, l_b = 0.f;
		wg_acc<D> oacc;
		wg_acc<TK> sacc;
		uint32_t pa[TK / 16][4];
		bool first = true;      /* this item's tile 0 still to score alone */

		for (int n = 0; w.ntiles; n++) {
			const int q0 = w.q0, bh = w.bh, ntiles = w.ntiles, qst = n % NQS;
			const int r0 = q0 + 64 * c, row_a = r0 + 16 * warp + lane / 4, row_b = row_a + 8;
			const uint64_t dq = sw128_desc(qs + qst * QB + c * 64 * 128, 16, 1024);

			if (first) {
				ws_first<T, D>(g, n, qst, r0, row_a, row_b, S, sl2, dq, dk0, full_q,
					       full_k, empty_k, oacc, sacc, pa, m_a, m_b, l_a, l_b);
				/* consumer 0 issues first (once a block) */
				if (PINGPONG && c == 1)
					named_arrive(1, 256);
			}

			for (int t = 0; t + 1 < ntiles; t++)
				ws_step<T, D, true>(t, g + t, c, r0, row_a, row_b, S, sl2, dq, dk0,
						    dv0, full_k, full_v, empty_k, empty_v, oacc,
						    sacc, pa, m_a, m_b, l_a, l_b);
			const ws_item w2 = ws_item_at(n + 1, nq, BH, G, S);
			float lo[2] = {l_a, l_b};       /* this item's row sums */

			first = !w2.ntiles;
			if (!first) {
				const int qn = (n + 1) % NQS, r0n = w2.q0 + 64 * c;
				const int ran = r0n + 16 * warp + lane / 4;
				const ws_next nxi = {sw128_desc(qs + qn * QB + c * 64 * 128, 16, 1024),
						     full_q + 8 * qn, (uint32_t)((n + 1) / NQS & 1), r0n,
						     ran, ran + 8};

				ws_step<T, D, true, true>(ntiles - 1, g + ntiles - 1, c, r0, row_a,
							  row_b, S, sl2, dq, dk0, dv0, full_k, full_v,
							  empty_k, empty_v, oacc, sacc, pa, m_a, m_b,
							  l_a, l_b, nxi, lo);
			} else {
				ws_step<T, D, false>(ntiles - 1, g + ntiles - 1, c, r0, row_a, row_b, S,
						     sl2, dq, dk0, dv0, full_k, full_v, empty_k, empty_v,
						     oacc, sacc, pa, m_a, m_b, l_a, l_b);
				lo[0] = l_a;
				lo[1] = l_b;
			}
			/* every wgmma of the item retired: its Q buffer is free */
			if (lane == 0)
				mbar_arrive(empty_q + 8 * qst);
			g += ntiles;
			store_o<T, D>(o + (int64_t)bh * S * D, oacc, lo[0], lo[1], row_a, row_b, S,
				      lane % 4);
			if (!first) {
#pragma unroll
				for (int i = 0; i < D / 2; i++)
					oacc.r[i] = 0.f;
			}
			w = w2;
		}
	} else {
		int g = 0;      /* K/V tiles consumed so far */

		for (int n = 0;; n++) {
			const ws_item w = ws_item_at(n, nq, BH, G, S);
			const int q0 = w.q0, bh = w.bh, ntiles = w.ntiles, qst = n % NQS;

			if (!ntiles)
				break;
			const int r0 = q0 + 64 * c, row_a = r0 + 16 * warp + lane / 4, row_b = row_a + 8;
			const uint64_t dq = sw128_desc(qs + qst * QB + c * 64 * 128, 16, 1024);
			float m_a, m_b, l_a, l_b;
			wg_acc<D> oacc;
			wg_acc<TK> sacc;
			uint32_t pa[TK / 16][4];

			ws_first<T, D>(g, n, qst, r0, row_a, row_b, S, sl2, dq, dk0, full_q,
				       full_k, empty_k, oacc, sacc, pa, m_a, m_b, l_a, l_b);
			if (PINGPONG && c == 1)
				named_arrive(1, 256);   /* consumer 0 issues first */

			for (int t = 0; t + 1 < ntiles; t++)
				ws_step<T, D, true>(t, g + t, c, r0, row_a, row_b, S, sl2, dq, dk0,
						    dv0, full_k, full_v, empty_k, empty_v, oacc,
						    sacc, pa, m_a, m_b, l_a, l_b);
			ws_step<T, D, false>(ntiles - 1, g + ntiles - 1, c, r0, row_a, row_b, S,
					     sl2, dq, dk0, dv0, full_k, full_v, empty_k, empty_v,
					     oacc, sacc, pa, m_a, m_b, l_a, l_b);
			/* every wgmma of the item retired: its Q buffer is free */
			if (lane == 0)
				mbar_arrive(empty_q + 8 * qst);
			g += ntiles;
			store_o<T, D>(o + (int64_t)bh * S * D, oacc, l_a, l_b, row_a, row_b, S,
				      lane % 4);
		}
	}
#endif
}

/* ------------------------------------------------------------------ */
/* mma.sync (FlashAttention-2), other D                                */

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

/* Four 8x8 b16 matrices from shared memory; lane l gives row l%8 of matrix l/8. */
static __device__ __forceinline__ void ldsm_x4(uint32_t *r, const void *p)
{
	unsigned a = (unsigned)__cvta_generic_to_shared(p);
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
		     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}

static __device__ __forceinline__ void ldsm_x4_trans(uint32_t *r, const void *p)
{
	unsigned a = (unsigned)__cvta_generic_to_shared(p);
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
		     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}

static __device__ __forceinline__ void cp_wait_all(void)
{
	asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}

/* Rows r0 .. r0+n-1 of one (b,h) slice into dst[n][D+8]; rows >= S zero. */
template <typename T, int D, bool VEC>
static __device__ __forceinline__ void load_rows(T *dst, const T *src, int r0,
						 int n, int S)
{
	constexpr int LD = D + 8;

	if constexpr (VEC) {
		for (int c = threadIdx.x; c < n * D / 8; c += 32 * MMA_WARPS) {
			const int r = c / (D / 8), col = c % (D / 8) * 8;
			const bool ok = r0 + r < S;
			cp_async16(dst + r * LD + col,
				   ok ? src + (int64_t)(r0 + r) * D + col : src,
				   ok ? 16 : 0);
		}
	} else {
		for (int e = threadIdx.x; e < n * D; e += 32 * MMA_WARPS) {
			const int r = e / D, col = e % D;
			dst[r * LD + col] = r0 + r < S ? src[(int64_t)(r0 + r) * D + col]
						       : from_f32<T>(0.f);
		}
	}
}

template <typename T, int D, bool VEC>
__global__ void __launch_bounds__(32 * MMA_WARPS)
flash_mma(const T *__restrict__ q, const T *__restrict__ k,
	 const T *__restrict__ v, T *__restrict__ o, int BH, int S, float scale)
{
	constexpr int LD = D + 8, NT = MMA_BKV / 8, DT = D / 8;
	extern __shared__ __align__(128) unsigned char smem[];
	T *Qs = (T *)smem, *Ks = Qs + MMA_BQ * LD, *Vs = Ks + 2 * MMA_BKV * LD;
	const int nq = (S + MMA_BQ - 1) / MMA_BQ;
	const int qb = nq - 1 - blockIdx.x / BH, bh = blockIdx.x % BH;
	const int q0 = qb * MMA_BQ, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	const int g = lane / 4, tq = lane % 4;
	const int row_a = q0 + warp * 16 + g, row_b = row_a + 8;
	const int64_t base = (int64_t)bh * S * D;
	const int kv_end = min(S, q0 + MMA_BQ), ntiles = (kv_end + MMA_BKV - 1) / MMA_BKV;
	const float sl2 = scale * 1.4426950408889634f;  /* scale * log2(e) */
	uint32_t qf[D / 16][4];
	float of[DT][4] = {}, m_a = -INFINITY, m_b = -INFINITY, l_a = 0.f, l_b = 0.f;

	load_rows<T, D, VEC>(Qs, q + base, q0, MMA_BQ, S);
	load_rows<T, D, VEC>(Ks, k + base, 0, MMA_BKV, S);
	load_rows<T, D, VEC>(Vs, v + base, 0, MMA_BKV, S);
	cp_commit();
	for (int t = 0; t < ntiles; t++) {
		cp_wait_all();
		__syncthreads();        /* tile t landed; buffer (t+1)&1 is free */
		if (t == 0) {   /* lane l: row l%16, column block l/16 */
			const T *qs = Qs + (warp * 16 + (lane & 15)) * LD + (lane >> 4) * 8;
#pragma unroll
			for (int kk = 0; kk < D / 16; kk++)
				ldsm_x4(qf[kk], qs + kk * 16);
		}
		if (t + 1 < ntiles) {
			const int nb = (t + 1) & 1;
			load_rows<T, D, VEC>(Ks + nb * MMA_BKV * LD, k + base, (t + 1) * MMA_BKV, MMA_BKV, S);
			load_rows<T, D, VEC>(Vs + nb * MMA_BKV * LD, v + base, (t + 1) * MMA_BKV, MMA_BKV, S);
		}
		cp_commit();

		const int j0 = t * MMA_BKV;
		if (j0 > q0 + warp * 16 + 15)
			continue;       /* every key of this tile is masked for this warp */
		const T *ks = Ks + (t & 1) * MMA_BKV * LD, *vs = Vs + (t & 1) * MMA_BKV * LD;

		/*
		 * S = Q K^T, masked, in log2 units.  K is [key][d] = B^T: one
		 * ldmatrix.x4 gives b0, b1 of two 8-key tiles (keys 0-7 / 8-15,
		 * d 0-7 / 8-15).
		 */
		float sf[NT][4] = {};
		const T *kb = ks + ((lane & 7) + (lane >> 4) * 8) * LD + (lane >> 3 & 1) * 8;
#pragma unroll
		for (int n16 = 0; n16 < NT / 2; n16++) {
#pragma unroll
			for (int kk = 0; kk < D / 16; kk++) {
				uint32_t kf[4];
				ldsm_x4(kf, kb + n16 * 16 * LD + kk * 16);
				mma16816<T>(sf[2 * n16], qf[kk], kf[0], kf[1]);
				mma16816<T>(sf[2 * n16 + 1], qf[kk], kf[2], kf[3]);
			}
		}
#pragma unroll
		for (int nt = 0; nt < NT; nt++) {
			const int j = j0 + nt * 8 + 2 * tq;
#pragma unroll
			for (int e = 0; e < 4; e++) {
				const int key = j + (e & 1), row = e < 2 ? row_a : row_b;
				sf[nt][e] = key <= row && key < S ? sf[nt][e] * sl2 : -INFINITY;
			}
		}

		/* Online softmax: new row max, rescale, P = exp2(S - max). */
		float mx_a = m_a, mx_b = m_b;
#pragma unroll
		for (int nt = 0; nt < NT; nt++) {
			mx_a = fmaxf(mx_a, fmaxf(sf[nt][0], sf[nt][1]));
			mx_b = fmaxf(mx_b, fmaxf(sf[nt][2], sf[nt][3]));
		}
#pragma unroll
		for (int off = 1; off < 4; off *= 2) {
			mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, off));
			mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, off));
		}
		const float mu_a = mx_a == -INFINITY ? 0.f : mx_a;
		const float mu_b = mx_b == -INFINITY ? 0.f : mx_b;
		const float al_a = exp2f(m_a - mu_a), al_b = exp2f(m_b - mu_b);
		m_a = mx_a;
		m_b = mx_b;
		l_a *= al_a;
		l_b *= al_b;
#pragma unroll
		for (int nt = 0; nt < NT; nt++) {
			sf[nt][0] = exp2f(sf[nt][0] - mu_a);
			sf[nt][1] = exp2f(sf[nt][1] - mu_a);
			sf[nt][2] = exp2f(sf[nt][2] - mu_b);
			sf[nt][3] = exp2f(sf[nt][3] - mu_b);
			l_a += sf[nt][0] + sf[nt][1];
			l_b += sf[nt][2] + sf[nt][3];
		}
#pragma unroll
		for (int dt = 0; dt < DT; dt++) {
			of[dt][0] *= al_a;
			of[dt][1] *= al_a;
			of[dt][2] *= al_b;
			of[dt][3] *= al_b;
		}

		/*
		 * O += P V; P's S-accumulator layout is the A-operand layout.  V
		 * is [key][d] = B: ldmatrix.trans gives b0, b1 of two 8-wide d
		 * tiles.
		 */
		const T *vb = vs + (lane & 15) * LD + (lane >> 4) * 8;
#pragma unroll
		for (int kk = 0; kk < MMA_BKV / 16; kk++) {
			uint32_t pa[4];
			pa[0] = pack2<T>(sf[2 * kk][0], sf[2 * kk][1]);
			pa[1] = pack2<T>(sf[2 * kk][2], sf[2 * kk][3]);
			pa[2] = pack2<T>(sf[2 * kk + 1][0], sf[2 * kk + 1][1]);
			pa[3] = pack2<T>(sf[2 * kk + 1][2], sf[2 * kk + 1][3]);
#pragma unroll
			for (int d16 = 0; d16 < D / 16; d16++) {
				uint32_t vf[4];
				ldsm_x4_trans(vf, vb + kk * 16 * LD + d16 * 16);
				mma16816<T>(of[2 * d16], pa, vf[0], vf[1]);
				mma16816<T>(of[2 * d16 + 1], pa, vf[2], vf[3]);
			}
		}
	}
	cp_wait_all();

	/* Normalize by the row sums (quad partials summed) and store. */
#pragma unroll
	for (int off = 1; off < 4; off *= 2) {
		l_a += __shfl_xor_sync(0xffffffffu, l_a, off);
		l_b += __shfl_xor_sync(0xffffffffu, l_b, off);
	}
	const float inv_a = 1.f / l_a, inv_b = 1.f / l_b;
#pragma unroll
	for (int dt = 0; dt < DT; dt++) {
		const int col = dt * 8 + 2 * tq;
		if (row_a < S) {
			T *p = o + base + (int64_t)row_a * D + col;
			p[0] = from_f32<T>(of[dt][0] * inv_a);
			p[1] = from_f32<T>(of[dt][1] * inv_a);
		}
		if (row_b < S) {
			T *p = o + base + (int64_t)row_b * D + col;
			p[0] = from_f32<T>(of[dt][2] * inv_b);
			p[1] = from_f32<T>(of[dt][3] * inv_b);
		}
	}
}

/* Fallback: one warp per query row, DPL = elements of D per lane. */
template <typename T, int DPL>
__global__ void __launch_bounds__(32 * SIMT_WARPS)
flash_simt(const T *__restrict__ q, const T *__restrict__ k,
	   const T *__restrict__ v, T *__restrict__ o, int64_t rows, int S,
	   int D, float scale)
{
	const int64_t r = (int64_t)blockIdx.x * SIMT_WARPS + threadIdx.x / 32;
	const int lane = threadIdx.x % 32;
	if (r >= rows)
		return;                 /* whole warp: no block barrier below */
	const int i = (int)(r % S);
	const int64_t base = (r - i) * D;
	float qv[DPL], acc[DPL], m = -INFINITY, l = 0.f;

#pragma unroll
	for (int u = 0; u < DPL; u++) {
		const int d = lane + 32 * u;
		qv[u] = d < D ? to_f32(q[r * D + d]) * scale : 0.f;
		acc[u] = 0.f;
	}
	for (int j = 0; j <= i; j++) {
		const T *kr = k + base + (int64_t)j * D, *vr = v + base + (int64_t)j * D;
		float s = 0.f;
#pragma unroll
		for (int u = 0; u < DPL; u++) {
			const int d = lane + 32 * u;
			s += d < D ? qv[u] * to_f32(kr[d]) : 0.f;
		}
#pragma unroll
		for (int off = 16; off > 0; off /= 2)
			s += __shfl_xor_sync(0xffffffffu, s, off);
		const float mn = fmaxf(m, s);
		const float al = expf(m - mn), p = expf(s - mn);   /* m = -inf: 0 */
		l = l * al + p;
#pragma unroll
		for (int u = 0; u < DPL; u++) {
			const int d = lane + 32 * u;
			acc[u] = acc[u] * al + (d < D ? p * to_f32(vr[d]) : 0.f);
		}
		m = mn;
	}
#pragma unroll
	for (int u = 0; u < DPL; u++) {
		const int d = lane + 32 * u;
		if (d < D)
			o[r * D + d] = from_f32<T>(acc[u] / l);
	}
}

template <typename T, int D, bool VEC>
static int launch_mma(const T *q, const T *k, const T *v, T *o, int BH, int S,
		     float scale, cudaStream_t st)
{
	const size_t smem = (size_t)(MMA_BQ + 4 * MMA_BKV) * (D + 8) * sizeof(T);
	const int64_t grid = (int64_t)BH * ((S + MMA_BQ - 1) / MMA_BQ);

	if (cudaFuncSetAttribute(flash_mma<T, D, VEC>,
				 cudaFuncAttributeMaxDynamicSharedMemorySize,
				 (int)smem) != cudaSuccess)
		return -1;
	flash_mma<T, D, VEC><<<grid, 32 * MMA_WARPS, smem, st>>>(q, k, v, o, BH, S, scale);
	return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

template <typename T, int D>
static int launch_mma(const T *q, const T *k, const T *v, T *o, int BH, int S,
		     float scale, cudaStream_t st)
{
	const bool vec = (((uintptr_t)q | (uintptr_t)k | (uintptr_t)v) & 15) == 0;

	return vec ? launch_mma<T, D, true>(q, k, v, o, BH, S, scale, st)
		   : launch_mma<T, D, false>(q, k, v, o, BH, S, scale, st);
}

template <typename T>
static int launch_simt(const T *q, const T *k, const T *v, T *o, int64_t rows,
		       int S, int D, float scale, cudaStream_t st)
{
	const int64_t grid = (rows + SIMT_WARPS - 1) / SIMT_WARPS;
	const int dpl = (D + 31) / 32;

	if (dpl <= 1)
		flash_simt<T, 1><<<grid, 32 * SIMT_WARPS, 0, st>>>(q, k, v, o, rows, S, D, scale);
	else if (dpl <= 2)
		flash_simt<T, 2><<<grid, 32 * SIMT_WARPS, 0, st>>>(q, k, v, o, rows, S, D, scale);
	else if (dpl <= 4)
		flash_simt<T, 4><<<grid, 32 * SIMT_WARPS, 0, st>>>(q, k, v, o, rows, S, D, scale);
	else if (dpl <= 8)
		flash_simt<T, 8><<<grid, 32 * SIMT_WARPS, 0, st>>>(q, k, v, o, rows, S, D, scale);
	else
		return -1;      /* D > 256 */
	return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

template <typename T, int D>
static int launch_wg(const T *q, const T *k, const T *v, T *o, int BH, int S,
		     float scale, cudaStream_t st)
{
	static bool ready;      /* the dynamic shared-memory limit, raised once */
	const int bq = 64 * wgs<D>();
	const size_t smem = (size_t)(bq + 2 * NSTAGE * BKV) * D * sizeof(T) + 1024;
	const int64_t grid = (int64_t)BH * ((S + bq - 1) / bq);

	if (smem > 227 * 1024)
		return 1;       /* too big for one block: the caller falls back */
	if (!ready) {
		if (cudaFuncSetAttribute(flash_wg<T, D>,
					 cudaFuncAttributeMaxDynamicSharedMemorySize,
					 (int)smem) != cudaSuccess)
			return -1;
		ready = true;
	}
	flash_wg<T, D><<<grid, 128 * wgs<D>(), smem, st>>>(q, k, v, o, BH, S,
							   heads_per_group(BH, S, D, sizeof(T), L2_MB),
							   scale);
	return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

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

/* [BH, S, D] as a 3-D map, boxes of 64 columns (the 128-byte swizzle's
 * span) x rows x one (b,h); zero fill past S within each (b,h). */
template <typename T>
static bool tensor_map3(CUtensorMap *map, const T *p, int BH, int S, int D, int rows)
{
	PFN_cuTensorMapEncodeTiled_v12000 enc = tensor_map_encoder();
	const cuuint64_t dim[3] = {(cuuint64_t)D, (cuuint64_t)S, (cuuint64_t)BH};
	const cuuint64_t stride[2] = {(cuuint64_t)D * sizeof(T),
				      (cuuint64_t)S * D * sizeof(T)};
	const cuuint32_t box[3] = {64, (cuuint32_t)rows, 1}, estride[3] = {1, 1, 1};

	return enc && enc(map, std::is_same_v<T, __half> ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
					: CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
			  3, (void *)p, dim, stride, box, estride,
			  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
			  CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
			  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
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

/* The device's L2 in bytes (50 MiB if it cannot tell). */
static int64_t l2_bytes(void)
{
	static int n;

	return device_attr(&n, cudaDevAttrL2CacheSize, 50 << 20);
}

/*
 * The head groups of flash_ws: L2_MB_WS where the grid is persistent and
 * all heads' K and V exceed L2, else L2_MB.  Persistent blocks
 * walk the items in order, so a group of 16 MiB keeps a head's K and V
 * in L2 from its first item to its last (H100, session 23: 8x32x512x128,
 * 64 MiB of K and V, 89.3 -> 80.2 us), where K and V that fit L2 whole
 * (2x32x1024x64 16 MiB, 4x16x2048x64 32 MiB) lost up to 9% to groups.
 */
static int ws_groups(int BH, int S, int D, int elem, int64_t grid, int64_t items)
{
	const int64_t all = 2 * (int64_t)BH * S * D * elem;
	const bool persistent = grid < items;
	int G = heads_per_group(BH, S, D, elem,
				persistent && all > l2_bytes() ? L2_MB_WS : L2_MB);

	/* With WS_EVEN, a persistent grid's groups hold a multiple of h
	 * heads, h * nq items a whole number of pairs of snake passes: a
	 * forward pass then a backward one deal a group's longest items
	 * and its shortest to the same blocks.  8x32x512x128 on 132 SMs:
	 * 64 heads (16 MiB of K and V) a group leave the busiest block 28
	 * tiles where 19.4 is even; 66 heads (h 66) leave it 20.  Only
	 * where that at most doubles the group. */
	if (WS_EVEN && persistent && G < BH) {
		const int nq = (S + WS_TILE - 1) / WS_TILE;
		int a = (int)(2 * grid), b = nq;

		while (b) {
			const int r = a % b;

			a = b;
			b = r;
		}
		const int h = (int)(2 * grid / a);       /* a: gcd(2 grid, nq) */

		if (h <= 2 * G)
			G = min(BH, max(h, (G + h / 2) / h * h));
	}
	return G;
}

/* 0 launched, 1 not possible here (the caller falls back), -1 error */
template <typename T, int D>
static int launch_ws(const T *q, const T *k, const T *v, T *o, int BH, int S,
		     float scale, cudaStream_t st)
{
	static bool ready;      /* the dynamic shared-memory limit, raised once */
	const int smem = (NQS * WS_TILE + 4 * WS_TILE) * D * (int)sizeof(T) + 96 + 1024;
	const int64_t items = (int64_t)BH * ((S + WS_TILE - 1) / WS_TILE);
	const int64_t grid = PERSIST && S <= PERSIST_S && items > sm_count() ?
		sm_count() : items;
	CUtensorMap mq, mk, mv;

	if (!tensor_map3(&mq, q, BH, S, D, WS_TILE) ||
	    !tensor_map3(&mk, k, BH, S, D, WS_TILE) ||
	    !tensor_map3(&mv, v, BH, S, D, WS_TILE))
		return 1;
	if (!ready) {
		cudaFuncAttributes fa;

		/* setmaxnreg 240 for 256 consumers and 24 for the producer fit
		 * only in the 168 a thread ptxas gives 384 threads; with fewer
		 * (a -maxrregcount) the consumers would wait forever */
		if (cudaFuncGetAttributes(&fa, flash_ws<T, D>) != cudaSuccess ||
		    fa.numRegs * 384 < 240 * 256 + 24 * 128)
			return 1;
		if (cudaFuncSetAttribute(flash_ws<T, D>,
					 cudaFuncAttributeMaxDynamicSharedMemorySize,
					 smem) != cudaSuccess)
			return -1;
		ready = true;
	}
	flash_ws<T, D><<<grid, 384, smem, st>>>(mq, mk, mv, o, BH, S,
						ws_groups(BH, S, D, sizeof(T), grid, items),
						scale);
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

template <typename T>
static int run(const struct ak_args *a)
{
	const struct ak_tensor *qt = &a->in[0];
	const T *q = (const T *)qt->data, *k = (const T *)a->in[1].data;
	const T *v = (const T *)a->in[2].data;
	T *o = (T *)a->out[0].data;
	const int BH = (int)(qt->shape[0] * qt->shape[1]);
	const int S = (int)qt->shape[2], D = (int)qt->shape[3];
	const float scale = (float)a->scalar[0];
	cudaStream_t st = (cudaStream_t)a->stream;

	if (qt->ndim != 4)
		return -1;
	if (BH == 0 || S == 0 || D == 0)
		return 0;
	if constexpr (sizeof(T) == 2) {
		const bool al16 = (((uintptr_t)q | (uintptr_t)k | (uintptr_t)v |
				    (uintptr_t)o) & 15) == 0;

		int r = 1;

		if (al16 && have_wgmma() && D == 64 && WS64)
			r = launch_ws<T, 64>(q, k, v, o, BH, S, scale, st);
		if (r == 1 && al16 && have_wgmma() && D == 64)
			r = launch_wg<T, 64>(q, k, v, o, BH, S, scale, st);
		else if (al16 && have_wgmma() && D == 128 && WS)
			r = launch_ws<T, 128>(q, k, v, o, BH, S, scale, st);
		if (r == 1 && al16 && have_wgmma() && D == 128)
			r = launch_wg<T, 128>(q, k, v, o, BH, S, scale, st);
		if (r <= 0)
			return r;
		switch (D) {
		case 16:
			return launch_mma<T, 16>(q, k, v, o, BH, S, scale, st);
		case 32:
			return launch_mma<T, 32>(q, k, v, o, BH, S, scale, st);
		case 64:
			return launch_mma<T, 64>(q, k, v, o, BH, S, scale, st);
		case 128:
			return launch_mma<T, 128>(q, k, v, o, BH, S, scale, st);
		}
	}
	return launch_simt<T>(q, k, v, o, (int64_t)BH * S, S, D, scale, st);
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
