/*
 * softmax: y[r,:] = exp(x[r,:] - max) / sum(exp(x[r,:] - max)), f32 math.
 *
 * A group of GROUP threads owns one row; a block holds BLOCK/GROUP rows.
 * When the row fits (at most 64 floats per thread) it stays in registers,
 * so HBM is read once and written once, with 16-byte loads and stores when
 * the row length and the pointers allow it.  Max and sum are butterflies
 * over the wavefront (__shfl_xor, 64 lanes on CDNA), then a fixed-order
 * pass over the group's waves in LDS: no atomics, so the output is bitwise
 * deterministic.  Longer rows take a streaming kernel (online max and
 * sum, then a second read to normalize).
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

/* exp(m_old - m_new), 0 when nothing was seen yet (avoids -inf - -inf). */
static __device__ __forceinline__ float rescale(float m_old, float m_new)
{
	return m_old == -INFINITY ? 0.f : expf(m_old - m_new);
}

/* Row in registers: ITEMS vectors of VEC elements per thread. */
template <typename T, int VEC, int ITEMS>
__global__ void __launch_bounds__(BLOCK)
softmax_regs(const T *__restrict__ x, T *__restrict__ y, int64_t R, int64_t C)
{
	__shared__ float red[BLOCK / WAVE];
	const int64_t row = (int64_t)blockIdx.x * (BLOCK / GROUP) + threadIdx.x / GROUP;
	const int t = threadIdx.x % GROUP;
	const bool live = row < R;
	const int64_t nv = C / VEC, off = (live ? row : 0) * C;
	float v[ITEMS][VEC];
	float m = -INFINITY;

#pragma unroll
	for (int k = 0; k < ITEMS; k++) {
		const int64_t i = (int64_t)k * GROUP + t;
		if (live && i < nv) {
			load_vec<T, VEC>(x + off + i * VEC, v[k]);
		} else {
#pragma unroll
			for (int j = 0; j < VEC; j++)
				v[k][j] = -INFINITY;
		}
#pragma unroll
		for (int j = 0; j < VEC; j++)
			m = fmaxf(m, v[k][j]);
	}
	m = group_reduce(m, red, op_max());

	float s = 0.f;
#pragma unroll
	for (int k = 0; k < ITEMS; k++) {
#pragma unroll
		for (int j = 0; j < VEC; j++) {
			v[k][j] = expf(v[k][j] - m);
			s += v[k][j];
		}
	}
	const float inv = 1.f / group_reduce(s, red, op_sum());

#pragma unroll
	for (int k = 0; k < ITEMS; k++) {
		const int64_t i = (int64_t)k * GROUP + t;
#pragma unroll
		for (int j = 0; j < VEC; j++)
			v[k][j] *= inv;
		if (live && i < nv)
			store_vec<T, VEC>(y + off + i * VEC, v[k]);
	}
}

/* Rows too long for registers: online max/sum pass, then normalize pass. */
template <typename T, int VEC>
__global__ void __launch_bounds__(BLOCK)
softmax_long(const T *__restrict__ x, T *__restrict__ y, int64_t R, int64_t C)
{
	__shared__ float red[BLOCK / WAVE];
	const int64_t row = (int64_t)blockIdx.x * (BLOCK / GROUP) + threadIdx.x / GROUP;
	const int t = threadIdx.x % GROUP;
	const bool live = row < R;
	const int64_t nv = live ? C / VEC : 0, off = (live ? row : 0) * C;
	float m = -INFINITY, s = 0.f, f[VEC];

	for (int64_t i = t; i < nv; i += GROUP) {
		load_vec<T, VEC>(x + off + i * VEC, f);
		float mn = m;
#pragma unroll
		for (int j = 0; j < VEC; j++)
			mn = fmaxf(mn, f[j]);
		/* all -inf so far (a masked prefix) adds 0, not NaN */
		const float base = mn == -INFINITY ? 0.f : mn;
		s *= rescale(m, mn);
#pragma unroll
		for (int j = 0; j < VEC; j++)
			s += expf(f[j] - base);
		m = mn;
	}
	const float mx = group_reduce(m, red, op_max());
	s *= rescale(m, mx);
	const float inv = 1.f / group_reduce(s, red, op_sum());

	for (int64_t i = t; i < nv; i += GROUP) {
		load_vec<T, VEC>(x + off + i * VEC, f);
#pragma unroll
		for (int j = 0; j < VEC; j++)
			f[j] = expf(f[j] - mx) * inv;
		store_vec<T, VEC>(y + off + i * VEC, f);
	}
}

/* Launches the register kernel with the smallest ITEMS that holds the row. */
template <typename T, int VEC, int ITEMS>
static bool launch_regs(int64_t per, int64_t grid, hipStream_t st,
			const T *x, T *y, int64_t R, int64_t C)
{
	if constexpr (ITEMS * VEC <= MAX_FLOATS) {
		if (per <= ITEMS) {
			softmax_regs<T, VEC, ITEMS><<<grid, BLOCK, 0, st>>>(x, y, R, C);
			return true;
		}
		return launch_regs<T, VEC, ITEMS * 2>(per, grid, st, x, y, R, C);
	}
	return false;
}

template <typename T, int VEC>
static void launch(int64_t grid, hipStream_t st, const T *x, T *y,
		   int64_t R, int64_t C)
{
	const int64_t per = (C / VEC + GROUP - 1) / GROUP;

	if (!launch_regs<T, VEC, 1>(per, grid, st, x, y, R, C))
		softmax_long<T, VEC><<<grid, BLOCK, 0, st>>>(x, y, R, C);
}

static bool aligned16(const void *p)
{
	return ((uintptr_t)p & 15) == 0;
}

template <typename T>
static int run(const struct ak_args *a)
{
	const struct ak_tensor *xt = &a->in[0];
	const int64_t C = xt->ndim ? xt->shape[xt->ndim - 1] : 1;
	const int64_t R = C ? ak_numel(xt) / C : 0;
	const T *x = (const T *)xt->data;
	T *y = (T *)a->out[0].data;
	hipStream_t st = (hipStream_t)a->stream;
	constexpr int V = 16 / sizeof(T);
	const int64_t grid = (R + BLOCK / GROUP - 1) / (BLOCK / GROUP);

	if (R == 0)
		return 0;
	if (C % V == 0 && aligned16(x) && aligned16(y))
		launch<T, V>(grid, st, x, y, R, C);
	else
		launch<T, 1>(grid, st, x, y, R, C);
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
