/*
 * fused_mlp (SwiGLU): y[T,D] = (silu(x w_gate^T) * (x w_up^T)) w_down^T,
 * silu(z) = z / (1 + e^-z), f32 accumulation.
 *
 * Two launches of one "NT" GEMM (C[M,N] = A[M,K] B[N,K]^T, both row-major):
 *   1. h[T,F] = silu(x w_gate^T) * (x w_up^T): one block computes the gate
 *      and the up tile together, so each x tile is loaded once for both, and
 *      the SiLU product is applied to the f32 accumulators in the epilogue.
 *      h goes to the workspace in the input dtype (f16/bf16/f32): one
 *      rounding of the intermediate, as doc/ops.md allows.
 *   2. y[T,D] = h w_down^T.
 * f16/bf16: tensor cores through mma.sync m16n8k16 (f32 accumulate) fed by
 * ldmatrix, 8 warps (2 x 4) per BM x BN tile, accumulators in registers and
 * stored straight from them; BK-deep tiles go through a STAGES-deep
 * cp.async shared-memory pipeline, rows padded by 8 elements (no ldmatrix
 * bank conflicts); 16-byte copies need K a multiple of 8 and aligned
 * pointers, else element-wise fills.
 * f32: a plain 64 x 64 shared-memory tiled SIMT kernel, exact f32 FFMA.
 */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>
#include <type_traits>
#include "autokernel.h"

#define BM 128     /* autokernel: tune 64,128,256 */
#define BN 128     /* autokernel: tune 64,128,256 if BM * BN <= 16384 */
#define BK 64      /* autokernel: tune 16,32,64 */
#define STAGES 2   /* autokernel: tune 2,3,4 if STAGES * (BM + 2 * BN) * (BK + 8) * 2 <= 220000 */

#define THREADS 256             /* 8 warps */
#define WARPS_M 2
#define WARPS_N 4
#define WTM (BM / WARPS_M)
#define WTN (BN / WARPS_N)
#define FM (WTM / 16)
#define FN (WTN / 16)
#define LDK (BK + 8)            /* padded smem row length, elements */
#define A_STAGE (BM * LDK)
#define B_STAGE (BN * LDK)

static_assert(WTM % 16 == 0 && WTN % 16 == 0 && BK % 16 == 0, "tile shape");

template <typename T> static __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ __half from_f32<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

static __device__ __forceinline__ float silu_mul(float g, float u)
{
	return g / (1.f + expf(-g)) * u;
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

template <int N>
static __device__ __forceinline__ void cp_wait(void)
{
	asm volatile("cp.async.wait_group %0;\n" :: "n"(N));
}

/* Rows r0..r0+ROWS-1, columns k0..k0+BK-1 of X[nrows,K] into dst[ROWS][LDK]. */
template <typename T, int ROWS, bool VEC>
static __device__ __forceinline__ void load_rows(T *dst, const T *X, int nrows,
						 int K, int r0, int k0)
{
	if constexpr (VEC) {
		for (int c = threadIdx.x; c < ROWS * BK / 8; c += THREADS) {
			const int r = c / (BK / 8), k = c % (BK / 8) * 8;
			const bool ok = r0 + r < nrows && k0 + k < K;
			const T *src = ok ? X + (int64_t)(r0 + r) * K + k0 + k : X;
			cp_async16(dst + r * LDK + k, src, ok ? 16 : 0);
		}
	} else {
		for (int e = threadIdx.x; e < ROWS * BK; e += THREADS) {
			const int r = e / BK, k = e % BK;
			const bool ok = r0 + r < nrows && k0 + k < K;
			dst[r * LDK + k] = ok ? X[(int64_t)(r0 + r) * K + k0 + k]
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

/*
 * C = A B0^T, or with DUAL C = silu(A B0^T) * (A B1^T).  Smem: STAGES x
 * (A tile, B0 tile [, B1 tile]), each [rows][BK + 8].
 */
template <typename T, bool DUAL, bool VEC>
__global__ void __launch_bounds__(THREADS)
gemm_nt_tc(const T *__restrict__ A, const T *__restrict__ B0,
	   const T *__restrict__ B1, T *__restrict__ C, int M, int N, int K)
{
	constexpr int NB = DUAL ? 2 : 1, STAGE = A_STAGE + NB * B_STAGE;
	extern __shared__ __align__(128) unsigned char smem[];
	T *tiles = (T *)smem;
	const int warp = threadIdx.x / 32, wm = warp / WARPS_N, wn = warp % WARPS_N;
	const int lane = threadIdx.x % 32;
	const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
	const int KT = (K + BK - 1) / BK;
	float acc[NB][FM][2 * FN][4] = {};

	auto load = [&](int stage, int kt) {
		T *st = tiles + stage * STAGE;
		load_rows<T, BM, VEC>(st, A, M, K, m0, kt * BK);
		load_rows<T, BN, VEC>(st + A_STAGE, B0, N, K, n0, kt * BK);
		if constexpr (DUAL)
			load_rows<T, BN, VEC>(st + A_STAGE + B_STAGE, B1, N, K, n0, kt * BK);
	};
	for (int s = 0; s < STAGES - 1; s++) {
		if (s < KT)
			load(s, s);
		cp_commit();
	}
	for (int kt = 0; kt < KT; kt++) {
		cp_wait<STAGES - 2>();
		__syncthreads();        /* tile kt landed; stage kt-1 is free */
		if (kt + STAGES - 1 < KT)
			load((kt + STAGES - 1) % STAGES, kt + STAGES - 1);
		cp_commit();

		/*
		 * A: lane l addresses row l%16, k block l/16 of a 16x16 piece.
		 * B [n][k]: matrices (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15,
		 * k 0-7), (n 8-15, k 8-15) = b0, b1 of two n8 tiles.
		 */
		const T *st = tiles + kt % STAGES * STAGE;
		const T *as = st + (wm * WTM + (lane & 15)) * LDK + (lane >> 4) * 8;
		const T *bs = st + A_STAGE +
			      (wn * WTN + (lane & 7) + (lane >> 4) * 8) * LDK +
			      (lane >> 3 & 1) * 8;
#pragma unroll
		for (int kk = 0; kk < BK; kk += 16) {
			uint32_t af[FM][4];
#pragma unroll
			for (int i = 0; i < FM; i++)
				ldsm_x4(af[i], as + i * 16 * LDK + kk);
#pragma unroll
			for (int b = 0; b < NB; b++) {
#pragma unroll
				for (int j = 0; j < FN; j++) {
					uint32_t bf[4];
					ldsm_x4(bf, bs + b * B_STAGE + j * 16 * LDK + kk);
#pragma unroll
					for (int i = 0; i < FM; i++) {
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
	for (int i = 0; i < FM; i++) {
#pragma unroll
		for (int j = 0; j < 2 * FN; j++) {
			const int m = m0 + wm * WTM + i * 16 + g;
			const int n = n0 + wn * WTN + j * 8 + 2 * tq;
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
static int launch_tc(const T *A, const T *B0, const T *B1, T *C, int M, int N,
		     int K, cudaStream_t st)
{
	constexpr int NB = DUAL ? 2 : 1;
	const size_t smem = (size_t)STAGES * (A_STAGE + NB * B_STAGE) * sizeof(T);
	dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);

	if (cudaFuncSetAttribute(gemm_nt_tc<T, DUAL, VEC>,
				 cudaFuncAttributeMaxDynamicSharedMemorySize,
				 (int)smem) != cudaSuccess)
		return -1;
	gemm_nt_tc<T, DUAL, VEC><<<grid, THREADS, smem, st>>>(A, B0, B1, C, M, N, K);
	return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

/* C[M,N] = A[M,K] B0[N,K]^T, or silu(A B0^T) * (A B1^T) when B1. */
template <typename T>
static int gemm_nt(const T *A, const T *B0, const T *B1, T *C, int M, int N,
		   int K, cudaStream_t st)
{
	if ((M + 63) / 64 > 65535)      /* gridDim.y; BM >= 64 */
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
		if (B1)
			return vec ? launch_tc<T, true, true>(A, B0, B1, C, M, N, K, st)
				   : launch_tc<T, true, false>(A, B0, B1, C, M, N, K, st);
		return vec ? launch_tc<T, false, true>(A, B0, B1, C, M, N, K, st)
			   : launch_tc<T, false, false>(A, B0, B1, C, M, N, K, st);
	}
}

static size_t elem_size(enum ak_dtype t)
{
	return t == AK_F32 ? 4 : 2;
}

extern "C" size_t ak_workspace_size(const struct ak_args *a)
{
	const int64_t T = a->in[0].shape[0], F = a->in[1].shape[0];

	return (size_t)(T * F) * elem_size(a->in[0].dtype);
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
	if (!h || a->workspace_size < (size_t)Tn * F * sizeof(T))
		return -1;
	if (gemm_nt<T>(x, wg, wu, h, Tn, F, D, st) != 0)
		return -1;
	return gemm_nt<T>(h, wd, nullptr, y, Tn, D, F, st);
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
