/*
 * cross_entropy: loss = mean over n of logsumexp(logits[n,:]) -
 * logits[n,target[n]], f32 math, f32 scalar output.
 *
 * Kernel 1: a group of GROUP threads owns one row (BLOCK/GROUP rows per
 * block) and streams it once with an online logsumexp: each thread keeps a
 * running max and a sum rescaled when the max grows (one extra exp per
 * vector of VEC, not per element), with UNROLL 16-byte loads in flight.  The
 * per-row loss goes to the workspace.  Kernel 2: one block sums the N losses
 * in a fixed order and divides by N.  No atomics: bitwise deterministic.
 */
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#include <hip/hip_bfloat16.h>
#include <math.h>
#include <stdint.h>
#include "autokernel.h"

#define BLOCK 256  /* autokernel: tune 128,256,512,1024 */
#define GROUP 256  /* autokernel: tune 32,64,128,256,512,1024 if GROUP <= BLOCK */
#define UNROLL 2   /* autokernel: tune 1,2,4,8 */

#define FINAL_BLOCK 1024

/* Lanes per wavefront: 64 on CDNA/GCN, 32 on RDNA (and HIP on NVIDIA). */
#ifdef __AMDGCN_WAVEFRONT_SIZE
#define WAVE __AMDGCN_WAVEFRONT_SIZE
#else
#define WAVE 32
#endif

static __device__ __forceinline__ float to_f32(float x) { return x; }
static __device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }
static __device__ __forceinline__ float to_f32(hip_bfloat16 x) { return (float)x; }

struct alignas(16) vec16 { uint32_t w[4]; };

/* VEC elements at p into f; one 16-byte access when VEC fills 16 bytes. */
template <typename T, int VEC>
static __device__ __forceinline__ void load_vec(const T *p, float *f)
{
	if constexpr (VEC * sizeof(T) == 16) {
		const vec16 u = *reinterpret_cast<const vec16 *>(p);
		T e[16 / sizeof(T)];

		__builtin_memcpy(e, &u, 16);
#pragma unroll
		for (int j = 0; j < VEC; j++)
			f[j] = to_f32(e[j]);
	} else {
#pragma unroll
		for (int j = 0; j < VEC; j++)
			f[j] = to_f32(p[j]);
	}
}

struct op_sum { __device__ float operator()(float a, float b) const { return a + b; } };
struct op_max { __device__ float operator()(float a, float b) const { return fmaxf(a, b); } };

/*
 * Reduces v over the GROUP consecutive threads of a row; every thread of the
 * group gets the same bits.  All threads of the block must call it.
 */
template <class Op>
static __device__ __forceinline__ float group_reduce(float v, float *red, Op op)
{
	constexpr int W = GROUP < WAVE ? GROUP : WAVE;
#pragma unroll
	for (int o = W / 2; o > 0; o /= 2)
		v = op(v, __shfl_xor(v, o));
	if constexpr (GROUP > WAVE) {
		constexpr int NW = GROUP / WAVE;
		const int wave = threadIdx.x / WAVE, first = wave / NW * NW;
		__syncthreads();        /* red may still be read by a previous call */
		if (threadIdx.x % WAVE == 0)
			red[wave] = v;
		__syncthreads();
		v = red[first];
#pragma unroll
		for (int i = 1; i < NW; i++)
			v = op(v, red[first + i]);
	}
	return v;
}


/* exp(m_old - m_new), 0 when nothing was seen yet (avoids -inf - -inf). */
static __device__ __forceinline__ float rescale(float m_old, float m_new)
{
	return m_old == -INFINITY ? 0.f : __expf(m_old - m_new);
}

template <typename T, int VEC>
__global__ void __launch_bounds__(BLOCK)
row_loss(const T *__restrict__ x, const int64_t *__restrict__ target,
	 float *__restrict__ loss, int64_t N, int64_t V)
{
	__shared__ float red[BLOCK / WAVE];
	const int64_t row = (int64_t)blockIdx.x * (BLOCK / GROUP) + threadIdx.x / GROUP;
	const int t = threadIdx.x % GROUP;
	const bool live = row < N;
	const int64_t nv = live ? V / VEC : 0, off = (live ? row : 0) * V;
	float m = -INFINITY, s = 0.f;

	for (int64_t base = t; base < nv; base += (int64_t)GROUP * UNROLL) {
		float f[UNROLL][VEC];
#pragma unroll
		for (int u = 0; u < UNROLL; u++) {
			const int64_t i = base + (int64_t)u * GROUP;
			if (i < nv) {
				load_vec<T, VEC>(x + off + i * VEC, f[u]);
			} else {
#pragma unroll
				for (int j = 0; j < VEC; j++)
					f[u][j] = -INFINITY;
			}
		}
#pragma unroll
		for (int u = 0; u < UNROLL; u++) {
			float mn = m;
#pragma unroll
			for (int j = 0; j < VEC; j++)
				mn = fmaxf(mn, f[u][j]);
			/* all -inf so far (masked logits) adds 0, not NaN */
			const float base = mn == -INFINITY ? 0.f : mn;
			s *= rescale(m, mn);
#pragma unroll
			for (int j = 0; j < VEC; j++)
				s += __expf(f[u][j] - base);
			m = mn;
		}
	}
	const float mx = group_reduce(m, red, op_max());
	s *= rescale(m, mx);
	s = group_reduce(s, red, op_sum());
	if (live && t == 0) {
		const int64_t k = target[row];
		const float xt = (k >= 0 && k < V) ? to_f32(x[off + k]) : NAN;
		loss[row] = logf(s) + mx - xt;
	}
}

/* One block: loss[0] = sum(row losses) / N, in a fixed order. */
__global__ void __launch_bounds__(FINAL_BLOCK)
mean_loss(const float *__restrict__ rows, float *__restrict__ out, int64_t N)
{
	__shared__ float red[FINAL_BLOCK / WAVE];
	float s = 0.f;

	for (int64_t i = threadIdx.x; i < N; i += FINAL_BLOCK)
		s += rows[i];
#pragma unroll
	for (int o = WAVE / 2; o > 0; o /= 2)
		s += __shfl_xor(s, o);
	if (threadIdx.x % WAVE == 0)
		red[threadIdx.x / WAVE] = s;
	__syncthreads();
	if (threadIdx.x == 0) {
		s = 0.f;
		for (int w = 0; w < FINAL_BLOCK / WAVE; w++)
			s += red[w];
		out[0] = s / (float)N;
	}
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

static bool aligned16(const void *p)
{
	return ((uintptr_t)p & 15) == 0;
}

template <typename T>
static int run(const struct ak_args *a)
{
	const struct ak_tensor *xt = &a->in[0];
	const int64_t V = xt->ndim ? xt->shape[xt->ndim - 1] : 1;
	const int64_t N = rows_of(a);
	const T *x = (const T *)xt->data;
	const int64_t *target = (const int64_t *)a->in[1].data;
	float *rows = (float *)a->workspace;
	float *out = (float *)a->out[0].data;
	hipStream_t st = (hipStream_t)a->stream;
	constexpr int VW = 16 / sizeof(T);
	const int64_t grid = (N + BLOCK / GROUP - 1) / (BLOCK / GROUP);

	if (a->in[1].dtype != AK_I64 || a->out[0].dtype != AK_F32)
		return -1;
	if (N > 0) {
		if (!rows || a->workspace_size < (size_t)N * sizeof(float))
			return -1;
		if (V % VW == 0 && aligned16(x))
			row_loss<T, VW><<<grid, BLOCK, 0, st>>>(x, target, rows, N, V);
		else
			row_loss<T, 1><<<grid, BLOCK, 0, st>>>(x, target, rows, N, V);
		if (hipGetLastError() != hipSuccess)
			return -1;
	}
	mean_loss<<<1, FINAL_BLOCK, 0, st>>>(rows, out, N);
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
