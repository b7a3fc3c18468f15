/*
 * layernorm: y = (x - mean) / sqrt(var + eps) * w + b per row, biased
 * variance, f32 math.
 *
 * A group of GROUP threads owns one row; a block holds BLOCK/GROUP rows.
 * When the row fits (at most 64 floats per thread) it stays in registers:
 * x is read from HBM once, the mean and then the variance of (x - mean)
 * are taken from registers (two-pass, so no cancellation), and y is written
 * once, with 16-byte accesses when the row length and pointers allow it.
 * Reductions are butterflies over the wavefront (__shfl_xor, 64 lanes on
 * CDNA) plus a fixed-order pass over the group's waves in LDS: bitwise
 * deterministic.  Longer rows take a streaming kernel that reads x three
 * times.
 */
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#include <hip/hip_bfloat16.h>
#include <math.h>
#include <stdint.h>
#include "autokernel.h"

#define BLOCK 256  /* autokernel: tune 128,256,512,1024 */
#define GROUP 256  /* autokernel: tune 32,64,128,256,512,1024 if GROUP <= BLOCK */

#define MAX_FLOATS 64   /* row floats a thread may hold in registers */

/* Lanes per wavefront: 64 on CDNA/GCN, 32 on RDNA (and HIP on NVIDIA). */
#ifdef __AMDGCN_WAVEFRONT_SIZE
#define WAVE __AMDGCN_WAVEFRONT_SIZE
#else
#define WAVE 32
#endif

static __device__ __forceinline__ float to_f32(float x) { return x; }
static __device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }
static __device__ __forceinline__ float to_f32(hip_bfloat16 x) { return (float)x; }
template <typename T> static __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_f32<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ hip_bfloat16 from_f32<hip_bfloat16>(float x) { return hip_bfloat16(x); }

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

template <typename T, int VEC>
static __device__ __forceinline__ void store_vec(T *p, const float *f)
{
	if constexpr (VEC * sizeof(T) == 16) {
		vec16 u;
		T e[16 / sizeof(T)];

#pragma unroll
		for (int j = 0; j < VEC; j++)
			e[j] = from_f32<T>(f[j]);
		__builtin_memcpy(&u, e, 16);
		*reinterpret_cast<vec16 *>(p) = u;
	} else {
#pragma unroll
		for (int j = 0; j < VEC; j++)
			p[j] = from_f32<T>(f[j]);
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


struct ln_args {
	const void *x, *w, *b;
	void *y;
	int64_t R, C;
	float eps;
};

/* Row in registers: ITEMS vectors of VEC elements per thread. */
template <typename T, int VEC, int ITEMS>
__global__ void __launch_bounds__(BLOCK) layernorm_regs(struct ln_args p)
{
	__shared__ float red[BLOCK / WAVE];
	const T *x = (const T *)p.x, *w = (const T *)p.w, *b = (const T *)p.b;
	T *y = (T *)p.y;
	const int64_t row = (int64_t)blockIdx.x * (BLOCK / GROUP) + threadIdx.x / GROUP;
	const int t = threadIdx.x % GROUP;
	const bool live = row < p.R;
	const int64_t nv = p.C / VEC, off = (live ? row : 0) * p.C;
	float v[ITEMS][VEC];
	float s = 0.f;

#pragma unroll
	for (int k = 0; k < ITEMS; k++) {
		const int64_t i = (int64_t)k * GROUP + t;
		if (live && i < nv) {
			load_vec<T, VEC>(x + off + i * VEC, v[k]);
		} else {
#pragma unroll
			for (int j = 0; j < VEC; j++)
				v[k][j] = 0.f;
		}
#pragma unroll
		for (int j = 0; j < VEC; j++)
			s += v[k][j];
	}
	const float mean = group_reduce(s, red, op_sum()) / (float)p.C;

	float q = 0.f;
#pragma unroll
	for (int k = 0; k < ITEMS; k++) {
		const bool in = (int64_t)k * GROUP + t < nv;
#pragma unroll
		for (int j = 0; j < VEC; j++) {
			v[k][j] -= mean;
			q += in ? v[k][j] * v[k][j] : 0.f;
		}
	}
	const float var = group_reduce(q, red, op_sum()) / (float)p.C;
	const float rstd = 1.f / sqrtf(var + p.eps);

#pragma unroll
	for (int k = 0; k < ITEMS; k++) {
		const int64_t i = (int64_t)k * GROUP + t;
		float wf[VEC], bf[VEC];

		if (!live || i >= nv)
			continue;
		load_vec<T, VEC>(w + i * VEC, wf);
		load_vec<T, VEC>(b + i * VEC, bf);
#pragma unroll
		for (int j = 0; j < VEC; j++)
			v[k][j] = v[k][j] * rstd * wf[j] + bf[j];
		store_vec<T, VEC>(y + off + i * VEC, v[k]);
	}
}

/* Rows too long for registers: mean pass, variance pass, output pass. */
template <typename T, int VEC>
__global__ void __launch_bounds__(BLOCK) layernorm_long(struct ln_args p)
{
	__shared__ float red[BLOCK / WAVE];
	const T *x = (const T *)p.x, *w = (const T *)p.w, *b = (const T *)p.b;
	T *y = (T *)p.y;
	const int64_t row = (int64_t)blockIdx.x * (BLOCK / GROUP) + threadIdx.x / GROUP;
	const int t = threadIdx.x % GROUP;
	const bool live = row < p.R;
	const int64_t nv = live ? p.C / VEC : 0, off = (live ? row : 0) * p.C;
	float f[VEC], wf[VEC], bf[VEC], s = 0.f, q = 0.f;

	for (int64_t i = t; i < nv; i += GROUP) {
		load_vec<T, VEC>(x + off + i * VEC, f);
#pragma unroll
		for (int j = 0; j < VEC; j++)
			s += f[j];
	}
	const float mean = group_reduce(s, red, op_sum()) / (float)p.C;
	for (int64_t i = t; i < nv; i += GROUP) {
		load_vec<T, VEC>(x + off + i * VEC, f);
#pragma unroll
		for (int j = 0; j < VEC; j++)
			q += (f[j] - mean) * (f[j] - mean);
	}
	const float var = group_reduce(q, red, op_sum()) / (float)p.C;
	const float rstd = 1.f / sqrtf(var + p.eps);
	for (int64_t i = t; i < nv; i += GROUP) {
		load_vec<T, VEC>(x + off + i * VEC, f);
		load_vec<T, VEC>(w + i * VEC, wf);
		load_vec<T, VEC>(b + i * VEC, bf);
#pragma unroll
		for (int j = 0; j < VEC; j++)
			f[j] = (f[j] - mean) * rstd * wf[j] + bf[j];
		store_vec<T, VEC>(y + off + i * VEC, f);
	}
}

/* Launches the register kernel with the smallest ITEMS that holds the row. */
template <typename T, int VEC, int ITEMS>
static bool launch_regs(int64_t per, int64_t grid, hipStream_t st,
			const struct ln_args &p)
{
	if constexpr (ITEMS * VEC <= MAX_FLOATS) {
		if (per <= ITEMS) {
			layernorm_regs<T, VEC, ITEMS><<<grid, BLOCK, 0, st>>>(p);
			return true;
		}
		return launch_regs<T, VEC, ITEMS * 2>(per, grid, st, p);
	}
	return false;
}

template <typename T, int VEC>
static void launch(int64_t grid, hipStream_t st, const struct ln_args &p)
{
	const int64_t per = (p.C / VEC + GROUP - 1) / GROUP;

	if (!launch_regs<T, VEC, 1>(per, grid, st, p))
		layernorm_long<T, VEC><<<grid, BLOCK, 0, st>>>(p);
}

static bool aligned16(const void *p)
{
	return ((uintptr_t)p & 15) == 0;
}

template <typename T>
static int run(const struct ak_args *a)
{
	const struct ak_tensor *xt = &a->in[0];
	struct ln_args p;
	constexpr int V = 16 / sizeof(T);

	p.x = xt->data;
	p.w = a->in[1].data;
	p.b = a->in[2].data;
	p.y = a->out[0].data;
	p.C = xt->ndim ? xt->shape[xt->ndim - 1] : 1;
	p.R = p.C ? ak_numel(xt) / p.C : 0;
	p.eps = (float)a->scalar[0];
	if (p.R == 0)
		return 0;

	const int64_t grid = (p.R + BLOCK / GROUP - 1) / (BLOCK / GROUP);
	hipStream_t st = (hipStream_t)a->stream;
	if (p.C % V == 0 && aligned16(p.x) && aligned16(p.w) &&
	    aligned16(p.b) && aligned16(p.y))
		launch<T, V>(grid, st, p);
	else
		launch<T, 1>(grid, st, p);
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
