/*
 * flash_attention: o = softmax(scale q k^T, causal) v per (batch, head),
 * q, k, v, o all [B,H,S,D], f32 softmax and accumulation.
 *
 * f16/bf16 with D in {16,32,64,128}: FlashAttention-2 on tensor cores.  A
 * block of WARPS warps owns 16*WARPS query rows of one (b,h), 16 per warp;
 * it walks the key tiles of BKV keys up to the diagonal.  K and V tiles are
 * double-buffered in shared memory by cp.async, so the next tile loads while
 * the current one is used.  Per tile each warp computes S = Q K^T with
 * mma.sync m16n8k16 fed by ldmatrix (Q fragments stay in registers; V is
 * read with ldmatrix.trans), masks, updates its
 * running row max and sum (online softmax, exp2 with the scale folded in),
 * rescales its O accumulators and adds P V, with P passed from the S
 * accumulators to the A operand in registers (the m16n8 C layout is the
 * m16k16 A layout), rounded once to the input dtype.  S never touches
 * memory; q, k, v are read once per query block, o written once.  Blocks
 * are ordered longest-first for causal load balance.
 *
 * f32, or any other D (up to 256): a simple SIMT kernel, one warp per query
 * row, lanes split D, online softmax over the keys it may see.
 */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>
#include <type_traits>
#include "autokernel.h"

#define WARPS 4    /* autokernel: tune 4,8 */
#define BKV 64     /* autokernel: tune 32,64,128 */

#define BQ (16 * WARPS)         /* query rows per block */
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

static __device__ __forceinline__ void cp_async16(void *smem, const void *gmem,
						  int bytes)
{
	unsigned s = (unsigned)__cvta_generic_to_shared(smem);
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
		     :: "r"(s), "l"(gmem), "r"(bytes));
}

static __device__ __forceinline__ void cp_commit(void)
{
	asm volatile("cp.async.commit_group;\n" ::);
}

static __device__ __forceinline__ void cp_wait_all(void)
{
	asm volatile("cp.async.wait_group 0;\n" ::);
}

/* Rows r0 .. r0+n-1 of one (b,h) slice into dst[n][D+8]; rows >= S zero. */
template <typename T, int D, bool VEC>
static __device__ __forceinline__ void load_rows(T *dst, const T *src, int r0,
						 int n, int S)
{
	constexpr int LD = D + 8;

	if constexpr (VEC) {
		for (int c = threadIdx.x; c < n * D / 8; c += 32 * WARPS) {
			const int r = c / (D / 8), col = c % (D / 8) * 8;
			const bool ok = r0 + r < S;
			cp_async16(dst + r * LD + col,
				   ok ? src + (int64_t)(r0 + r) * D + col : src,
				   ok ? 16 : 0);
		}
	} else {
		for (int e = threadIdx.x; e < n * D; e += 32 * WARPS) {
			const int r = e / D, col = e % D;
			dst[r * LD + col] = r0 + r < S ? src[(int64_t)(r0 + r) * D + col]
						       : from_f32<T>(0.f);
		}
	}
}

template <typename T, int D, bool VEC>
__global__ void __launch_bounds__(32 * WARPS)
flash_tc(const T *__restrict__ q, const T *__restrict__ k,
	 const T *__restrict__ v, T *__restrict__ o, int BH, int S, float scale)
{
	constexpr int LD = D + 8, NT = BKV / 8, DT = D / 8;
	extern __shared__ __align__(128) unsigned char smem[];
	T *Qs = (T *)smem, *Ks = Qs + BQ * LD, *Vs = Ks + 2 * BKV * LD;
	const int nq = (S + BQ - 1) / BQ;
	const int qb = nq - 1 - blockIdx.x / BH, bh = blockIdx.x % BH;
	const int q0 = qb * BQ, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	const int g = lane / 4, tq = lane % 4;
	const int row_a = q0 + warp * 16 + g, row_b = row_a + 8;
	const int64_t base = (int64_t)bh * S * D;
	const int kv_end = min(S, q0 + BQ), ntiles = (kv_end + BKV - 1) / BKV;
	const float sl2 = scale * 1.4426950408889634f;  /* scale * log2(e) */
	uint32_t qf[D / 16][4];
	float of[DT][4] = {}, m_a = -INFINITY, m_b = -INFINITY, l_a = 0.f, l_b = 0.f;

	load_rows<T, D, VEC>(Qs, q + base, q0, BQ, S);
	load_rows<T, D, VEC>(Ks, k + base, 0, BKV, S);
	load_rows<T, D, VEC>(Vs, v + base, 0, BKV, S);
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
			load_rows<T, D, VEC>(Ks + nb * BKV * LD, k + base, (t + 1) * BKV, BKV, S);
			load_rows<T, D, VEC>(Vs + nb * BKV * LD, v + base, (t + 1) * BKV, BKV, S);
		}
		cp_commit();

		const int j0 = t * BKV;
		if (j0 > q0 + warp * 16 + 15)
			continue;       /* every key of this tile is masked for this warp */
		const T *ks = Ks + (t & 1) * BKV * LD, *vs = Vs + (t & 1) * BKV * LD;

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
		for (int kk = 0; kk < BKV / 16; kk++) {
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
static int launch_tc(const T *q, const T *k, const T *v, T *o, int BH, int S,
		     float scale, cudaStream_t st)
{
	const size_t smem = (size_t)(BQ + 4 * BKV) * (D + 8) * sizeof(T);
	const int64_t grid = (int64_t)BH * ((S + BQ - 1) / BQ);

	if (cudaFuncSetAttribute(flash_tc<T, D, VEC>,
				 cudaFuncAttributeMaxDynamicSharedMemorySize,
				 (int)smem) != cudaSuccess)
		return -1;
	flash_tc<T, D, VEC><<<grid, 32 * WARPS, smem, st>>>(q, k, v, o, BH, S, scale);
	return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

template <typename T, int D>
static int launch_tc(const T *q, const T *k, const T *v, T *o, int BH, int S,
		     float scale, cudaStream_t st)
{
	const bool vec = (((uintptr_t)q | (uintptr_t)k | (uintptr_t)v) & 15) == 0;

	return vec ? launch_tc<T, D, true>(q, k, v, o, BH, S, scale, st)
		   : launch_tc<T, D, false>(q, k, v, o, BH, S, scale, st);
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
		switch (D) {
		case 16:
			return launch_tc<T, 16>(q, k, v, o, BH, S, scale, st);
		case 32:
			return launch_tc<T, 32>(q, k, v, o, BH, S, scale, st);
		case 64:
			return launch_tc<T, 64>(q, k, v, o, BH, S, scale, st);
		case 128:
			return launch_tc<T, 128>(q, k, v, o, BH, S, scale, st);
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
