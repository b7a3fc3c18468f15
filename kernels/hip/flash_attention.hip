/*
 * flash_attention: o = softmax(scale q k^T, causal) v per (batch, head),
 * q, k, v, o all [B,H,S,D], f32 softmax and accumulation.
 *
 * D up to 128: a tiled FlashAttention on the vector ALUs.  A block of 256
 * threads owns BQ query rows of one (b,h), TPR = 256/BQ threads per row,
 * and walks the key tiles of BKV keys up to the causal diagonal.  The
 * scaled Q tile stays in LDS as f32; per key tile, K goes to LDS, each
 * thread computes BKV/TPR scores of its row, the row's max and sum are
 * butterflies over its TPR lanes (__shfl_xor, inside one wavefront),
 * the running max, sum and the O accumulators (D/TPR per thread, in
 * registers) are rescaled (online softmax), P goes to LDS, then V takes
 * K's place in LDS and O += P V.  S never touches memory; k and v are read
 * once per query block, o written once.  Blocks run longest-first for the
 * causal load balance.  Rows are padded by one float (no bank conflicts).
 *
 * Any longer D (up to 512): one block of 64 threads per query row, lanes
 * split D, online softmax over the keys it may see.
 *
 * All sums run in a fixed order: bitwise deterministic.  Where the time
 * goes next: S = Q K^T and O += P V on MFMA matrix cores for f16/bf16.
 */
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#include <hip/hip_bfloat16.h>
#include <math.h>
#include <stdint.h>
#include "autokernel.h"

#define BQ 32      /* autokernel: tune 16,32,64 */
#define BKV 32     /* autokernel: tune 16,32,64 if (BQ + BKV) * 129 + BQ * (BKV + 1) <= 16384 */

#define THREADS 256
#define TPR (THREADS / BQ)      /* threads per query row: 16, 8 or 4 */
#define ROW_THREADS 64          /* long-D fallback: threads per query row */
#define ROW_NPL 8               /* its D values per thread: D <= 512 */

/* Lanes per wavefront: 64 on CDNA/GCN, 32 on RDNA (and HIP on NVIDIA). */
#ifdef __AMDGCN_WAVEFRONT_SIZE
#define WAVE __AMDGCN_WAVEFRONT_SIZE
#else
#define WAVE 32
#endif

static_assert(BKV % TPR == 0 && TPR <= 32, "tile shape");

static __device__ __forceinline__ float to_f32(float x) { return x; }
static __device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }
static __device__ __forceinline__ float to_f32(hip_bfloat16 x) { return (float)x; }
template <typename T> static __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_f32<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ hip_bfloat16 from_f32<hip_bfloat16>(float x) { return hip_bfloat16(x); }

/* Max or sum over the TPR consecutive lanes of a row (one wavefront). */
static __device__ __forceinline__ float row_max(float v)
{
#pragma unroll
	for (int o = TPR / 2; o > 0; o /= 2)
		v = fmaxf(v, __shfl_xor(v, o));
	return v;
}

static __device__ __forceinline__ float row_sum(float v)
{
#pragma unroll
	for (int o = TPR / 2; o > 0; o /= 2)
		v += __shfl_xor(v, o);
	return v;
}

/* rows x DP of src (row stride D) into dst, zeros past n rows or D. */
template <typename T, int ROWS, int DP>
static __device__ __forceinline__ void stage(float (*dst)[DP + 1], const T *src,
					     int n, int D, float mul)
{
	for (int e = threadIdx.x; e < ROWS * DP; e += THREADS) {
		const int r = e / DP, d = e % DP;

		dst[r][d] = r < n && d < D ? to_f32(src[(int64_t)r * D + d]) * mul : 0.f;
	}
}

/* DP: D rounded up to 32, 64 or 128. */
template <typename T, int DP>
__global__ void __launch_bounds__(THREADS)
attn_tiled(const T *__restrict__ q, const T *__restrict__ k,
	   const T *__restrict__ v, T *__restrict__ o, int S, int D,
	   float scale)
{
	constexpr int NS = BKV / TPR, NO = DP / TPR;
	__shared__ float Qs[BQ][DP + 1];
	__shared__ float KVs[BKV][DP + 1];
	__shared__ float Ps[BQ][BKV + 1];
	const int q0 = (gridDim.x - 1 - blockIdx.x) * BQ;      /* longest first */
	const int64_t base = (int64_t)blockIdx.y * S * D;
	const int r = threadIdx.x / TPR, c = threadIdx.x % TPR;
	const int qi = q0 + r;
	const int kend = min(S, q0 + BQ);
	float acc[NO], m = -INFINITY, l = 0.f;

#pragma unroll
	for (int i = 0; i < NO; i++)
		acc[i] = 0.f;
	stage<T, BQ, DP>(Qs, q + base + (int64_t)q0 * D, S - q0, D, scale);
	for (int k0 = 0; k0 < kend; k0 += BKV) {
		float s[NS], mt = -INFINITY, ls = 0.f;

		__syncthreads();        /* the last tile's V and P are used */
		stage<T, BKV, DP>(KVs, k + base + (int64_t)k0 * D, S - k0, D, 1.f);
		__syncthreads();
#pragma unroll
		for (int jj = 0; jj < NS; jj++) {
			const int j = c + TPR * jj, key = k0 + j;
			float dot = 0.f;

#pragma unroll 8
			for (int d = 0; d < DP; d++)
				dot = fmaf(Qs[r][d], KVs[j][d], dot);
			s[jj] = key <= qi && key < S ? dot : -INFINITY;
			mt = fmaxf(mt, s[jj]);
		}
		/* Key 0 is in the first tile and every row sees it, so mn is
		 * finite from the first tile on. */
		const float mn = fmaxf(m, row_max(mt));
		const float alpha = m == -INFINITY ? 0.f : expf(m - mn);
#pragma unroll
		for (int jj = 0; jj < NS; jj++) {
			const float p = expf(s[jj] - mn);

			Ps[r][c + TPR * jj] = p;
			ls += p;
		}
		l = l * alpha + row_sum(ls);
		m = mn;
#pragma unroll
		for (int i = 0; i < NO; i++)
			acc[i] *= alpha;
		__syncthreads();        /* K is used, P is written */
		stage<T, BKV, DP>(KVs, v + base + (int64_t)k0 * D, S - k0, D, 1.f);
		__syncthreads();
		for (int j = 0; j < BKV; j++) {
			const float p = Ps[r][j];
#pragma unroll
			for (int i = 0; i < NO; i++)
				acc[i] = fmaf(p, KVs[j][c + TPR * i], acc[i]);
		}
	}
	if (qi >= S)
		return;
#pragma unroll
	for (int i = 0; i < NO; i++) {
		const int d = c + TPR * i;
		if (d < D)
			o[base + (int64_t)qi * D + d] = from_f32<T>(acc[i] / l);
	}
}

/* Sum over the block's ROW_THREADS threads; all of them get the same bits. */
static __device__ __forceinline__ float block_sum(float v, float *red)
{
	constexpr int W = ROW_THREADS < WAVE ? ROW_THREADS : WAVE;
#pragma unroll
	for (int o = W / 2; o > 0; o /= 2)
		v += __shfl_xor(v, o);
	if constexpr (ROW_THREADS > WAVE) {
		__syncthreads();        /* red may still be read */
		if (threadIdx.x % WAVE == 0)
			red[threadIdx.x / WAVE] = v;
		__syncthreads();
		v = red[0];
#pragma unroll
		for (int i = 1; i < ROW_THREADS / WAVE; i++)
			v += red[i];
	}
	return v;
}

/* Long D: one block per query row, threads split D. */
template <typename T>
__global__ void __launch_bounds__(ROW_THREADS)
attn_rows(const T *__restrict__ q, const T *__restrict__ k,
	  const T *__restrict__ v, T *__restrict__ o, int S, int D,
	  float scale)
{
	__shared__ float red[ROW_THREADS / 32];
	const int64_t row = blockIdx.x;
	const int i = (int)(row % S), t = threadIdx.x;
	const int64_t base = (row - i) * D;
	float qv[ROW_NPL], acc[ROW_NPL], m = -INFINITY, l = 0.f;

#pragma unroll
	for (int e = 0; e < ROW_NPL; e++) {
		const int d = t + ROW_THREADS * e;

		qv[e] = d < D ? to_f32(q[base + (int64_t)i * D + d]) * scale : 0.f;
		acc[e] = 0.f;
	}
	for (int j = 0; j <= i; j++) {
		const T *kj = k + base + (int64_t)j * D, *vj = v + base + (int64_t)j * D;
		float s = 0.f;

#pragma unroll
		for (int e = 0; e < ROW_NPL; e++) {
			const int d = t + ROW_THREADS * e;
			if (d < D)
				s = fmaf(qv[e], to_f32(kj[d]), s);
		}
		s = block_sum(s, red);
		const float mn = fmaxf(m, s);
		const float alpha = m == -INFINITY ? 0.f : expf(m - mn);
		const float p = expf(s - mn);

		l = l * alpha + p;
		m = mn;
#pragma unroll
		for (int e = 0; e < ROW_NPL; e++) {
			const int d = t + ROW_THREADS * e;
			acc[e] = acc[e] * alpha + (d < D ? p * to_f32(vj[d]) : 0.f);
		}
	}
#pragma unroll
	for (int e = 0; e < ROW_NPL; e++) {
		const int d = t + ROW_THREADS * e;
		if (d < D)
			o[base + (int64_t)i * D + d] = from_f32<T>(acc[e] / l);
	}
}

template <typename T, int DP>
static void launch_tiled(hipStream_t st, const struct ak_args *a, int64_t BH,
			 int S, int D)
{
	const dim3 grid((unsigned)((S + BQ - 1) / BQ), (unsigned)BH);

	attn_tiled<T, DP><<<grid, THREADS, 0, st>>>(
		(const T *)a->in[0].data, (const T *)a->in[1].data,
		(const T *)a->in[2].data, (T *)a->out[0].data, S, D,
		(float)a->scalar[0]);
}

template <typename T>
static int run(const struct ak_args *a)
{
	const struct ak_tensor *qt = &a->in[0];
	hipStream_t st = (hipStream_t)a->stream;

	if (qt->ndim != 4)
		return -1;
	const int64_t BH = qt->shape[0] * qt->shape[1];
	const int S = (int)qt->shape[2], D = (int)qt->shape[3];

	if (BH * S * D == 0)
		return 0;
	if (D > ROW_THREADS * ROW_NPL || BH > 65535)
		return -1;
	if (D <= 32)
		launch_tiled<T, 32>(st, a, BH, S, D);
	else if (D <= 64)
		launch_tiled<T, 64>(st, a, BH, S, D);
	else if (D <= 128)
		launch_tiled<T, 128>(st, a, BH, S, D);
	else
		attn_rows<T><<<(unsigned)(BH * S), ROW_THREADS, 0, st>>>(
			(const T *)qt->data, (const T *)a->in[1].data,
			(const T *)a->in[2].data, (T *)a->out[0].data, S, D,
			(float)a->scalar[0]);
	return hipGetLastError() == hipSuccess ? 0 : -1;
}

extern "C" int ak_kernel(const struct ak_args *a)
{
	switch (a->in[0].dtype) {
	case AK_F16:
		return run<__half>(a);
	case AK_BF16:
		return run<hip_bfloat16>(a);
	case AK_F32:
		return run<float>(a);
	default:
		return -1;
	}
}
