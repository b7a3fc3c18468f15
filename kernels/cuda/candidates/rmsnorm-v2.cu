/*
 * rmsnorm: y = x / sqrt(mean(x^2) + eps) * w per row, f32 math.
 *
 * A group of GROUP threads owns one row; a block holds BLOCK/GROUP rows.
 * When the row fits (at most 64 floats per thread) it stays in registers:
 * x is read from HBM once and y written once, with 16-byte accesses when
 * the row length and pointers allow it.  The sum of squares is a warp
 * shuffle plus a fixed-order pass over the group's warps: bitwise
 * deterministic.  Longer rows take a streaming kernel that reads x twice.
 */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>
#include "autokernel.h"

#define BLOCK 256  /* autokernel: tune 128,256,512,1024 */
#define GROUP 256  /* autokernel: tune 32,64,128,256,512,1024 if GROUP <= BLOCK */

#define MAX_FLOATS 64   /* row floats a thread may hold in registers */

static __device__ __forceinline__ float to_f32(float x) { return x; }
static __device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }
static __device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> static __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_f32<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

/* VEC elements at p into f; one 16-byte access when VEC fills 16 bytes. */
template <typename T, int VEC>
static __device__ __forceinline__ void load_vec(const T *p, float *f)
{
	if constexpr (VEC * sizeof(T) == 16) {
		uint4 u = __ldg(reinterpret_cast<const uint4 *>(p));
		const T *e = reinterpret_cast<const T *>(&u);
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
		uint4 u;
		T *e = reinterpret_cast<T *>(&u);
#pragma unroll
		for (int j = 0; j < VEC; j++)
			e[j] = from_f32<T>(f[j]);
		*reinterpret_cast<uint4 *>(p) = u;
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
	constexpr int W = GROUP < 32 ? GROUP : 32;
#pragma unroll
	for (int o = W / 2; o > 0; o /= 2)
		v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
	if constexpr (GROUP > 32) {
		constexpr int NW = GROUP / 32;
		const int warp = threadIdx.x / 32, first = warp / NW * NW;
		__syncthreads();        /* red may still be read by a previous call */
		if (threadIdx.x % 32 == 0)
			red[warp] = v;
		__syncthreads();
		v = red[first];
#pragma unroll
		for (int i = 1; i < NW; i++)
			v = op(v, red[first + i]);
	}
	return v;
}


struct rms_args {
	const void *x, *w;
	void *y;
	int64_t R, C;
	float eps;
};

/* Row in registers: ITEMS vectors of VEC elements per thread. */
template <typename T, int VEC, int ITEMS>
__global__ void __launch_bounds__(BLOCK) rmsnorm_regs(struct rms_args p)
{
	__shared__ float red[BLOCK / 32];
	const T *x = (const T *)p.x, *w = (const T *)p.w;
	T *y = (T *)p.y;
	const int64_t row = (int64_t)blockIdx.x * (BLOCK / GROUP) + threadIdx.x / GROUP;
	const int t = threadIdx.x % GROUP;
	const bool live = row < p.R;
	const int64_t nv = p.C / VEC, off = (live ? row : 0) * p.C;
	float v[ITEMS][VEC];
	float q = 0.f;

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
			q += v[k][j] * v[k][j];
	}
	/* w now, so its latency hides under the reduction. */
	float wf[ITEMS][VEC];
#pragma unroll
	for (int k = 0; k < ITEMS; k++) {
		const int64_t i = (int64_t)k * GROUP + t;
		if (i < nv)
			load_vec<T, VEC>(w + i * VEC, wf[k]);
	}
	const float ms = group_reduce(q, red, op_sum()) / (float)p.C;
	const float rstd = 1.f / sqrtf(ms + p.eps);

#pragma unroll
	for (int k = 0; k < ITEMS; k++) {
		const int64_t i = (int64_t)k * GROUP + t;

		if (!live || i >= nv)
			continue;
#pragma unroll
		for (int j = 0; j < VEC; j++)
			v[k][j] = v[k][j] * rstd * wf[k][j];
		store_vec<T, VEC>(y + off + i * VEC, v[k]);
	}
}

/* Rows too long for registers: sum-of-squares pass, then output pass. */
template <typename T, int VEC>
__global__ void __launch_bounds__(BLOCK) rmsnorm_long(struct rms_args p)
{
	__shared__ float red[BLOCK / 32];
	const T *x = (const T *)p.x, *w = (const T *)p.w;
	T *y = (T *)p.y;
	const int64_t row = (int64_t)blockIdx.x * (BLOCK / GROUP) + threadIdx.x / GROUP;
	const int t = threadIdx.x % GROUP;
	const bool live = row < p.R;
	const int64_t nv = live ? p.C / VEC : 0, off = (live ? row : 0) * p.C;
	float f[VEC], wf[VEC], q = 0.f;

	for (int64_t i = t; i < nv; i += GROUP) {
		load_vec<T, VEC>(x + off + i * VEC, f);
#pragma unroll
		for (int j = 0; j < VEC; j++)
			q += f[j] * f[j];
	}
	const float ms = group_reduce(q, red, op_sum()) / (float)p.C;
	const float rstd = 1.f / sqrtf(ms + p.eps);
	for (int64_t i = t; i < nv; i += GROUP) {
		load_vec<T, VEC>(x + off + i * VEC, f);
		load_vec<T, VEC>(w + i * VEC, wf);
#pragma unroll
		for (int j = 0; j < VEC; j++)
			f[j] = f[j] * rstd * wf[j];
		store_vec<T, VEC>(y + off + i * VEC, f);
	}
}

/* Launches the register kernel with the smallest ITEMS that holds the row. */
template <typename T, int VEC, int ITEMS>
static bool launch_regs(int64_t per, int64_t grid, cudaStream_t st,
			const struct rms_args &p)
{
	if constexpr (ITEMS * VEC <= MAX_FLOATS) {
		if (per <= ITEMS) {
			rmsnorm_regs<T, VEC, ITEMS><<<grid, BLOCK, 0, st>>>(p);
			return true;
		}
		return launch_regs<T, VEC, ITEMS * 2>(per, grid, st, p);
	}
	return false;
}

template <typename T, int VEC>
static void launch(int64_t grid, cudaStream_t st, const struct rms_args &p)
{
	const int64_t per = (p.C / VEC + GROUP - 1) / GROUP;

	if (!launch_regs<T, VEC, 1>(per, grid, st, p))
		rmsnorm_long<T, VEC><<<grid, BLOCK, 0, st>>>(p);
}

static bool aligned16(const void *p)
{
	return ((uintptr_t)p & 15) == 0;
}

template <typename T>
static int run(const struct ak_args *a)
{
	const struct ak_tensor *xt = &a->in[0];
	struct rms_args p;
	constexpr int V = 16 / sizeof(T);

	p.x = xt->data;
	p.w = a->in[1].data;
	p.y = a->out[0].data;
	p.C = xt->ndim ? xt->shape[xt->ndim - 1] : 1;
	p.R = p.C ? ak_numel(xt) / p.C : 0;
	p.eps = (float)a->scalar[0];
	if (p.R == 0)
		return 0;

	const int64_t grid = (p.R + BLOCK / GROUP - 1) / (BLOCK / GROUP);
	cudaStream_t st = (cudaStream_t)a->stream;
	if (p.C % V == 0 && aligned16(p.x) && aligned16(p.w) && aligned16(p.y))
		launch<T, V>(grid, st, p);
	else
		launch<T, 1>(grid, st, p);
	return cudaGetLastError() == cudaSuccess ? 0 : -1;
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
