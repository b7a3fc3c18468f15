/*
 * rotary_embedding, naive: one thread per pair (b,h,s,i), the pair (a, b) at
 * (2i, 2i+1) interleaved (scalar[0] = 0) or (i, i+D/2) half-split (1):
 * a' = a cos - b sin, b' = a sin + b cos, in f32.
 */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>
#include "autokernel.h"

static __device__ __forceinline__ float to_f32(float x) { return x; }
static __device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }
static __device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> static __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_f32<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

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
	return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

template <typename T>
__global__ void rope_naive(const T *x, const T *cs, const T *sn, T *y,
			   int64_t pairs, int64_t S, int64_t half, bool split)
{
	FOR_EACH(p, pairs) {
		const int64_t i = p % half, s = p / half % S, row = p / half;
		const int64_t ia = split ? row * 2 * half + i : 2 * p;
		const int64_t ib = split ? ia + half : 2 * p + 1;
		const float a = to_f32(x[ia]), b = to_f32(x[ib]);
		const float c = to_f32(cs[s * half + i]), sv = to_f32(sn[s * half + i]);
		y[ia] = from_f32<T>(a * c - b * sv);
		y[ib] = from_f32<T>(a * sv + b * c);
	}
}

template <typename T>
static int run(const struct ak_args *a)
{
	const struct ak_tensor *xt = &a->in[0];

	if (xt->ndim != 4 || xt->shape[3] % 2 != 0)
		return -1;
	if (a->scalar[0] != 0 && a->scalar[0] != 1)
		return -1;                      /* no such layout */
	const int64_t S = xt->shape[2], half = xt->shape[3] / 2;
	const int64_t pairs = xt->shape[0] * xt->shape[1] * S * half;
	if (pairs == 0)
		return 0;
	rope_naive<T><<<grid_for(pairs), 256, 0, (cudaStream_t)a->stream>>>(
		(const T *)xt->data, (const T *)a->in[1].data,
		(const T *)a->in[2].data, (T *)a->out[0].data, pairs, S, half,
		a->scalar[0] == 1);
	return launched();
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
