/*
 * matmul: C[M,N] = A[M,K] B[K,N], row-major, f32 accumulation.
 *
 * f16/bf16: tensor cores through mma.sync m16n8k16 (f32 accumulate) fed by
 * ldmatrix (.trans for B).  A block of 8 warps (2 x 4) computes a BM x BN
 * tile of C; each warp holds a (BM/2) x (BN/4) patch of accumulators in
 * registers and stores it straight from them.  A and B tiles of
 * depth BK go through shared memory in a STAGES-deep cp.async pipeline, so
 * the loads of the next tiles overlap the math on the current one; rows are
 * padded by 8 elements, which keeps ldmatrix free of bank conflicts.  16-byte copies need K and N
 * to be multiples of 8 and aligned pointers; otherwise the same pipeline
 * fills its tiles element by element.  Out-of-range elements are zeros, and
 * the epilogue writes only inside C.
 *
 * f32: a plain shared-memory tiled SIMT kernel (64 x 64 tile, 4 x 4 outputs
 * per thread, FFMA), exact f32 math; tensor-core TF32 would lose precision.
 */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>
#include <type_traits>
#include "autokernel.h"

#define BM 128     /* autokernel: tune 64,128,256 */
#define BN 128     /* autokernel: tune 64,128,256 if BM * BN <= 32768 */
#define BK 64      /* autokernel: tune 16,32,64 */
#define STAGES 3   /* autokernel: tune 2,3,4 if STAGES * (BM * (BK + 8) + BK * (BN + 8)) * 2 <= 220000 */

#define THREADS 256             /* 8 warps */
#define WARPS_M 2
#define WARPS_N 4
#define WTM (BM / WARPS_M)      /* warp tile rows */
#define WTN (BN / WARPS_N)      /* warp tile cols */
#define FM (WTM / 16)
#define FN (WTN / 16)
#define LDA (BK + 8)            /* padded smem row lengths, elements */
#define LDB (BN + 8)
#define A_STAGE (BM * LDA)
#define B_STAGE (BK * LDB)
#define SMEM_BYTES(T) (STAGES * (A_STAGE + B_STAGE) * sizeof(T))

static_assert(WTM % 16 == 0 && WTN % 16 == 0 && BK % 16 == 0, "tile shape");

template <typename T> static __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ __half from_f32<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

/* 16-byte global->shared copy; bytes == 0 writes zeros and reads nothing. */
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

/* Tile kt of A (BM x BK) and B (BK x BN) into one pipeline stage. */
template <typename T, bool VEC>
static __device__ __forceinline__ void load_tile(T *As, T *Bs, const T *A,
						 const T *B, int M, int N,
						 int K, int m0, int n0, int k0)
{
	if constexpr (VEC) {
		for (int c = threadIdx.x; c < BM * BK / 8; c += THREADS) {
			const int r = c / (BK / 8), k = c % (BK / 8) * 8;
			const bool ok = m0 + r < M && k0 + k < K;
			const T *src = ok ? A + (int64_t)(m0 + r) * K + k0 + k : A;
			cp_async16(As + r * LDA + k, src, ok ? 16 : 0);
		}
		for (int c = threadIdx.x; c < BK * BN / 8; c += THREADS) {
			const int r = c / (BN / 8), n = c % (BN / 8) * 8;
			const bool ok = k0 + r < K && n0 + n < N;
			const T *src = ok ? B + (int64_t)(k0 + r) * N + n0 + n : B;
			cp_async16(Bs + r * LDB + n, src, ok ? 16 : 0);
		}
	} else {
		const T zero = from_f32<T>(0.f);
		for (int e = threadIdx.x; e < BM * BK; e += THREADS) {
			const int r = e / BK, k = e % BK;
			const bool ok = m0 + r < M && k0 + k < K;
			As[r * LDA + k] = ok ? A[(int64_t)(m0 + r) * K + k0 + k] : zero;
		}
		for (int e = threadIdx.x; e < BK * BN; e += THREADS) {
			const int r = e / BN, n = e % BN;
			const bool ok = k0 + r < K && n0 + n < N;
			Bs[r * LDB + n] = ok ? B[(int64_t)(k0 + r) * N + n0 + n] : zero;
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

static __device__ __forceinline__ void ldsm_x4_trans(uint32_t *r, const void *p)
{
	unsigned a = (unsigned)__cvta_generic_to_shared(p);
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
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

template <typename T, bool VEC>
__global__ void __launch_bounds__(THREADS)
gemm_tc(const T *__restrict__ A, const T *__restrict__ B, T *__restrict__ C,
	int M, int N, int K)
{
	extern __shared__ __align__(128) unsigned char smem[];
	T *As = (T *)smem, *Bs = As + STAGES * A_STAGE;
	const int warp = threadIdx.x / 32, wm = warp / WARPS_N, wn = warp % WARPS_N;
	const int lane = threadIdx.x % 32;
	const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
	const int KT = (K + BK - 1) / BK;
	float acc[FM][2 * FN][4] = {};

	for (int s = 0; s < STAGES - 1; s++) {
		if (s < KT)
			load_tile<T, VEC>(As + s * A_STAGE, Bs + s * B_STAGE, A, B,
					  M, N, K, m0, n0, s * BK);
		cp_commit();
	}
	for (int kt = 0; kt < KT; kt++) {
		cp_wait<STAGES - 2>();
		__syncthreads();        /* tile kt landed; stage kt-1 is free */
		const int nt = kt + STAGES - 1;
		if (nt < KT)
			load_tile<T, VEC>(As + nt % STAGES * A_STAGE,
					  Bs + nt % STAGES * B_STAGE, A, B,
					  M, N, K, m0, n0, nt * BK);
		cp_commit();

		/* lane l addresses row l%16, column block l/16 of a 16x16 piece */
		const T *as = As + kt % STAGES * A_STAGE +
			      (wm * WTM + (lane & 15)) * LDA + (lane >> 4) * 8;
		const T *bs = Bs + kt % STAGES * B_STAGE + (lane & 15) * LDB +
			      wn * WTN + (lane >> 4) * 8;
#pragma unroll
		for (int kk = 0; kk < BK; kk += 16) {
			uint32_t af[FM][4], bf[FN][4];
#pragma unroll
			for (int i = 0; i < FM; i++)
				ldsm_x4(af[i], as + i * 16 * LDA + kk);
#pragma unroll
			for (int j = 0; j < FN; j++)
				ldsm_x4_trans(bf[j], bs + kk * LDB + j * 16);
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

	/* m16n8 accumulator layout: c0,c1 at (g, 2t..), c2,c3 at (g+8, 2t..). */
	const bool pair = N % 2 == 0 && ((uintptr_t)C & 3) == 0;
	const int g = lane / 4, tq = lane % 4;
#pragma unroll
	for (int i = 0; i < FM; i++)
#pragma unroll
		for (int j = 0; j < 2 * FN; j++) {
			const int m = m0 + wm * WTM + i * 16 + g;
			const int n = n0 + wn * WTN + j * 8 + 2 * tq;
			store2(C, M, N, m, n, acc[i][j][0], acc[i][j][1], pair);
			store2(C, M, N, m + 8, n, acc[i][j][2], acc[i][j][3], pair);
		}
}

/* f32: 64x64 tile, BK 16, each thread 4x4 outputs strided by 16. */
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

template <typename T, bool VEC>
static int launch_tc(const T *A, const T *B, T *C, int M, int N, int K,
		     cudaStream_t st)
{
	const size_t smem = SMEM_BYTES(T);
	dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);

	if (cudaFuncSetAttribute(gemm_tc<T, VEC>,
				 cudaFuncAttributeMaxDynamicSharedMemorySize,
				 (int)smem) != cudaSuccess)
		return -1;
	gemm_tc<T, VEC><<<grid, THREADS, smem, st>>>(A, B, C, M, N, K);
	return cudaGetLastError() == cudaSuccess ? 0 : -1;
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
	if ((M + 63) / 64 > 65535)      /* gridDim.y; BM >= 64 */
		return -1;
	if constexpr (sizeof(T) == 4) {
		dim3 grid((N + 63) / 64, (M + 63) / 64);
		sgemm<<<grid, 256, 0, st>>>(A, B, C, M, N, K);
		return cudaGetLastError() == cudaSuccess ? 0 : -1;
	} else {
		const bool vec = K % 8 == 0 && N % 8 == 0 &&
				 ((uintptr_t)A & 15) == 0 && ((uintptr_t)B & 15) == 0;
		return vec ? launch_tc<T, true>(A, B, C, M, N, K, st)
			   : launch_tc<T, false>(A, B, C, M, N, K, st);
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
