/*
 * reduce: y[r] = sum of x[r,:], f32 accumulation.
 *
 * A group of GROUP threads owns one row; a block holds BLOCK/GROUP rows.
 * Each thread streams its share of the row with UNROLL independent 16-byte
 * loads in flight (when the row length and pointer allow 16-byte access),
 * so the kernel runs at HBM speed with one read of x.  The group sum is a
 * butterfly over the wavefront (__shfl_xor, WAVE lanes: 64 on CDNA, 32 on
 * RDNA) plus a fixed-order pass over the group's waves in LDS: bitwise
 * deterministic, no atomics.
 */
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#include <hip/hip_bfloat16.h>
#include <math.h>
#include <stdint.h>
#include "autokernel.h"

#define BLOCK 256  /* autokernel: tune 128,256,512,1024 */
#define GROUP 256  /* autokernel: tune 32,64,128,256,512,1024 if GROUP <= BLOCK */
#define UNROLL 4   /* autokernel: tune 1,2,4,8 */

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
		T e[VEC];

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

template <typename T, int VEC>
__global__ void __launch_bounds__(BLOCK)
reduce_rows(const T *__restrict__ x, T *__restrict__ y, int64_t R, int64_t C)
{
	__shared__ float red[BLOCK / WAVE];
	const int64_t row = (int64_t)blockIdx.x * (BLOCK / GROUP) + threadIdx.x / GROUP;
	const int t = threadIdx.x % GROUP;
	const bool live = row < R;
	const int64_t nv = live ? C / VEC : 0, off = (live ? row : 0) * C;
	float s = 0.f;

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
					f[u][j] = 0.f;
			}
		}
#pragma unroll
		for (int u = 0; u < UNROLL; u++)
#pragma unroll
			for (int j = 0; j < VEC; j++)
				s += f[u][j];
	}
	s = group_reduce(s, red, op_sum());
	if (live && t == 0)
		y[row] = from_f32<T>(s);
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
	const int64_t R = ak_numel(&a->out[0]);
	const T *x = (const T *)xt->data;
	T *y = (T *)a->out[0].data;
	hipStream_t st = (hipStream_t)a->stream;
	constexpr int V = 16 / sizeof(T);
	const int64_t grid = (R + BLOCK / GROUP - 1) / (BLOCK / GROUP);

	if (R == 0)
		return 0;
	if (C % V == 0 && aligned16(x))
		reduce_rows<T, V><<<grid, BLOCK, 0, st>>>(x, y, R, C);
	else
		reduce_rows<T, 1><<<grid, BLOCK, 0, st>>>(x, y, R, C);
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
