/*
 * matmul: C[M,N] = A[M,K] B[K,N], row-major, f32 accumulation.
 *
 * A plain LDS-tiled kernel on the vector ALUs, the same for f16, bf16 and
 * f32: a block of 256 threads (four waves of 64 on CDNA) computes a BM x BN
 * tile of C.  Tiles of A and B of depth BK are staged in LDS as f32 (A
 * transposed, so that both are read along the tile's rows), and each
 * thread keeps a (BM/16) x (BN/16) patch of C in registers, its rows and
 * columns strided by 16 so that a wave's LDS reads are broadcasts or hit
 * distinct banks.  Rows are padded by 4 floats.  Out-of-range elements are
 * zeros and only C inside bounds is written.  K is summed in one fixed
 * order with FMA: exact f32 math, bitwise deterministic.
 *
 * Where the time goes next: MFMA matrix cores for f16/bf16
 * (__builtin_amdgcn_mfma_f32_32x32x8f16, ..._bf16_1k), 16-byte global
 * loads, and double-buffered LDS so loads overlap the math.
 */
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#include <hip/hip_bfloat16.h>
#include <stdint.h>
#include "autokernel.h"

#define BM 128     /* autokernel: tune 64,128 */
#define BN 128     /* autokernel: tune 64,128 */
#define BK 16      /* autokernel: tune 8,16,32 */

#define THREADS 256             /* a 16 x 16 grid of threads */
#define TM (BM / 16)            /* outputs per thread, rows */
#define TN (BN / 16)            /* outputs per thread, columns */

static __device__ __forceinline__ float to_f32(float x) { return x; }
static __device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }
static __device__ __forceinline__ float to_f32(hip_bfloat16 x) { return (float)x; }
template <typename T> static __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_f32<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ hip_bfloat16 from_f32<hip_bfloat16>(float x) { return hip_bfloat16(x); }

template <typename T>
__global__ void __launch_bounds__(THREADS)
gemm_nn(const T *__restrict__ A, const T *__restrict__ B, T *__restrict__ C,
	int M, int N, int K)
{
	__shared__ float As[BK][BM + 4];        /* [k][m] */
	__shared__ float Bs[BK][BN + 4];        /* [k][n] */
	const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
	const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
	float acc[TM][TN];

#pragma unroll
	for (int i = 0; i < TM; i++)
#pragma unroll
		for (int j = 0; j < TN; j++)
			acc[i][j] = 0.f;
	for (int k0 = 0; k0 < K; k0 += BK) {
		for (int e = threadIdx.x; e < BM * BK; e += THREADS) {
			const int r = e / BK, k = e % BK;
			const bool ok = m0 + r < M && k0 + k < K;

			As[k][r] = ok ? to_f32(A[(int64_t)(m0 + r) * K + k0 + k]) : 0.f;
		}
		for (int e = threadIdx.x; e < BK * BN; e += THREADS) {
			const int k = e / BN, n = e % BN;
			const bool ok = k0 + k < K && n0 + n < N;

			Bs[k][n] = ok ? to_f32(B[(int64_t)(k0 + k) * N + n0 + n]) : 0.f;
		}
		__syncthreads();
#pragma unroll
		for (int k = 0; k < BK; k++) {
			float a[TM], b[TN];
#pragma unroll
			for (int i = 0; i < TM; i++)
				a[i] = As[k][ty + 16 * i];
#pragma unroll
			for (int j = 0; j < TN; j++)
				b[j] = Bs[k][tx + 16 * j];
#pragma unroll
			for (int i = 0; i < TM; i++)
#pragma unroll
				for (int j = 0; j < TN; j++)
					acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
		}
		__syncthreads();
	}
#pragma unroll
	for (int i = 0; i < TM; i++)
#pragma unroll
		for (int j = 0; j < TN; j++) {
			const int m = m0 + ty + 16 * i, n = n0 + tx + 16 * j;
			if (m < M && n < N)
				C[(int64_t)m * N + n] = from_f32<T>(acc[i][j]);
		}
}

template <typename T>
static int run(const struct ak_args *a)
{
	const int64_t M = a->in[0].shape[0], K = a->in[0].shape[1];
	const int64_t N = a->in[1].shape[1];
	const dim3 grid((unsigned)((N + BN - 1) / BN), (unsigned)((M + BM - 1) / BM));

	if (M * N == 0)
		return 0;
	if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX || grid.y > 65535)
		return -1;
	gemm_nn<T><<<grid, THREADS, 0, (hipStream_t)a->stream>>>(
		(const T *)a->in[0].data, (const T *)a->in[1].data,
		(T *)a->out[0].data, (int)M, (int)N, (int)K);
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
