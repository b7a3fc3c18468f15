/*
 * matmul, naive: one thread per element of C[M,N] = A[M,K] B[K,N], an f32
 * dot product over K.  The obviously-correct baseline and cross-check.
 */
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#include <hip/hip_bfloat16.h>
#include <math.h>
#include <stdint.h>
#include "autokernel.h"

static __device__ __forceinline__ float to_f32(float x) { return x; }
static __device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }
static __device__ __forceinline__ float to_f32(hip_bfloat16 x) { return (float)x; }
template <typename T> static __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_f32<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ hip_bfloat16 from_f32<hip_bfloat16>(float x) { return hip_bfloat16(x); }

/* Grid-stride loop over [0, n). */
#define FOR_EACH(i, n) \
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
	     i += (int64_t)gridDim.x * blockDim.x)

static unsigned grid_for(int64_t n)
{
	const int64_t g = (n + 255) / 256;
	return (unsigned)(g < 1 ? 1 : g > (1 << 20) ? (1 << 20) : g);
}

static int launched(void)
{
	return hipGetLastError() == hipSuccess ? 0 : -1;
}

template <typename T>
__global__ void matmul_naive(const T *A, const T *B, T *C, int64_t M,
			     int64_t N, int64_t K)
{
	FOR_EACH(idx, M * N) {
		const int64_t m = idx / N, n = idx % N;
		float s = 0.f;
		for (int64_t k = 0; k < K; k++)
			s += to_f32(A[m * K + k]) * to_f32(B[k * N + n]);
		C[idx] = from_f32<T>(s);
	}
}

template <typename T>
static int run(const struct ak_args *a)
{
	const int64_t M = a->in[0].shape[0], K = a->in[0].shape[1];
	const int64_t N = a->in[1].shape[1];

	if (M * N == 0)
		return 0;
	matmul_naive<T><<<grid_for(M * N), 256, 0, (hipStream_t)a->stream>>>(
		(const T *)a->in[0].data, (const T *)a->in[1].data,
		(T *)a->out[0].data, M, N, K);
	return launched();
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
