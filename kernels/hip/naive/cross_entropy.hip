/*
 * cross_entropy, naive: one thread per row writes logsumexp(x) - x[target]
 * to the workspace; one thread sums the rows in order and divides by N.
 * Sums in f64 so that long rows stay exact.
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
__global__ void row_loss_naive(const T *x, const int64_t *target, float *loss,
			       int64_t N, int64_t V)
{
	FOR_EACH(n, N) {
		const T *xr = x + n * V;
		const int64_t t = target[n];
		float m = -INFINITY;
		double s = 0.0;
		for (int64_t c = 0; c < V; c++)
			m = fmaxf(m, to_f32(xr[c]));
		for (int64_t c = 0; c < V; c++)
			s += expf(to_f32(xr[c]) - m);
		loss[n] = (float)log(s) + m - (t >= 0 && t < V ? to_f32(xr[t]) : NAN);
	}
}

__global__ void mean_naive(const float *loss, float *out, int64_t N)
{
	double s = 0.0;
	for (int64_t n = 0; n < N; n++)
		s += loss[n];
	out[0] = (float)(s / (double)N);
}

static int64_t rows_of(const struct ak_args *a)
{
	const struct ak_tensor *xt = &a->in[0];
	const int64_t V = xt->ndim ? xt->shape[xt->ndim - 1] : 1;

	return V ? ak_numel(xt) / V : 0;
}

extern "C" size_t ak_workspace_size(const struct ak_args *a)
{
	return (size_t)rows_of(a) * sizeof(float);
}

template <typename T>
static int run(const struct ak_args *a)
{
	const struct ak_tensor *xt = &a->in[0];
	const int64_t V = xt->ndim ? xt->shape[xt->ndim - 1] : 1;
	const int64_t N = rows_of(a);
	float *loss = (float *)a->workspace;
	hipStream_t st = (hipStream_t)a->stream;

	if (N > 0) {
		if (!loss || a->workspace_size < (size_t)N * sizeof(float))
			return -1;
		row_loss_naive<T><<<grid_for(N), 256, 0, st>>>(
			(const T *)xt->data, (const int64_t *)a->in[1].data,
			loss, N, V);
		if (launched() != 0)
			return -1;
	}
	mean_naive<<<1, 1, 0, st>>>(loss, (float *)a->out[0].data, N);
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
