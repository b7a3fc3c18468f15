/*
 * layernorm, naive: one thread per row; mean, biased variance of (x - mean),
 * then y = (x - mean) / sqrt(var + eps) * w + b; row sums in f64 so that
 * long rows stay exact, the rest in f32.
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
__global__ void layernorm_naive(const T *x, const T *w, const T *b, T *y,
				int64_t R, int64_t C, float eps)
{
	FOR_EACH(r, R) {
		const T *xr = x + r * C;
		double mean = 0.0, var = 0.0;
		for (int64_t c = 0; c < C; c++)
			mean += to_f32(xr[c]);
		mean /= (double)C;
		for (int64_t c = 0; c < C; c++) {
			const double d = to_f32(xr[c]) - mean;
			var += d * d;
		}
		var /= (double)C;
		const float mf = (float)mean, rstd = (float)(1.0 / sqrt(var + eps));
		for (int64_t c = 0; c < C; c++)
			y[r * C + c] = from_f32<T>((to_f32(xr[c]) - mf) * rstd *
						   to_f32(w[c]) + to_f32(b[c]));
	}
}

template <typename T>
static int run(const struct ak_args *a)
{
	const struct ak_tensor *xt = &a->in[0];
	const int64_t C = xt->ndim ? xt->shape[xt->ndim - 1] : 1;
	const int64_t R = C ? ak_numel(xt) / C : 0;

	if (R == 0)
		return 0;
	layernorm_naive<T><<<grid_for(R), 256, 0, (hipStream_t)a->stream>>>(
		(const T *)xt->data, (const T *)a->in[1].data,
		(const T *)a->in[2].data, (T *)a->out[0].data, R, C,
		(float)a->scalar[0]);
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
