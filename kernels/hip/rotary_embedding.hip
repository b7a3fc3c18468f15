/*
 * rotary_embedding: for each row (b,h,s) of x[B,H,S,D] and pair i < D/2,
 * with (a, b) = (x[..,2i], x[..,2i+1]) interleaved (scalar[0] = 0) or
 * (x[..,i], x[..,i+D/2]) half-split (scalar[0] = 1, rotate_half's pairs):
 *   a' = a cos[s,i] - b sin[s,i],  b' = a sin[s,i] + b cos[s,i].
 *
 * A block takes ROWS consecutive rows; its threads walk the rows' pairs in
 * chunks of VP pairs, so each thread does one 16-byte load and store of x/y
 * (two 8-byte ones, from the two halves of the row, half-split) and two
 * 8-byte loads of cos/sin (which stay in L2: S x D/2 is small) when
 * D/2 is a multiple of VP and the pointers are aligned; else one pair at a
 * time.  The grid is 1D over row blocks, so B*H*S may exceed 65535.  Pure
 * streaming: x read once, y written once, f32 math.
 */
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#include <hip/hip_bfloat16.h>
#include <stdint.h>
#include "autokernel.h"

#define BLOCK 256  /* autokernel: tune 64,128,256,512,1024 */
#define ROWS 16    /* autokernel: tune 1,2,4,8,16,32,64 */

static __device__ __forceinline__ float to_f32(float x) { return x; }
static __device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }
static __device__ __forceinline__ float to_f32(hip_bfloat16 x) { return (float)x; }
template <typename T> static __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_f32<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ hip_bfloat16 from_f32<hip_bfloat16>(float x) { return hip_bfloat16(x); }

struct alignas(16) vec16 { uint32_t w[4]; };
struct alignas(8) vec8 { uint32_t w[2]; };

/* N elements at p into f: one 16- or 8-byte access when VEC and N fills it. */
template <typename T, int N, bool VEC>
static __device__ __forceinline__ void load_n(const T *p, float *f)
{
	if constexpr (VEC && N * sizeof(T) == 16) {
		const vec16 u = *reinterpret_cast<const vec16 *>(p);
		T e[16 / sizeof(T)];

		__builtin_memcpy(e, &u, 16);
#pragma unroll
		for (int j = 0; j < N; j++)
			f[j] = to_f32(e[j]);
	} else if constexpr (VEC && N * sizeof(T) == 8) {
		const vec8 u = *reinterpret_cast<const vec8 *>(p);
		T e[8 / sizeof(T)];

		__builtin_memcpy(e, &u, 8);
#pragma unroll
		for (int j = 0; j < N; j++)
			f[j] = to_f32(e[j]);
	} else {
#pragma unroll
		for (int j = 0; j < N; j++)
			f[j] = to_f32(p[j]);
	}
}

template <typename T, int N, bool VEC>
static __device__ __forceinline__ void store_n(T *p, const float *f)
{
	if constexpr (VEC && N * sizeof(T) == 16) {
		vec16 u;
		T e[16 / sizeof(T)];

#pragma unroll
		for (int j = 0; j < N; j++)
			e[j] = from_f32<T>(f[j]);
		__builtin_memcpy(&u, e, 16);
		*reinterpret_cast<vec16 *>(p) = u;
	} else if constexpr (VEC && N * sizeof(T) == 8) {
		vec8 u;
		T e[8 / sizeof(T)];

#pragma unroll
		for (int j = 0; j < N; j++)
			e[j] = from_f32<T>(f[j]);
		__builtin_memcpy(&u, e, 8);
		*reinterpret_cast<vec8 *>(p) = u;
	} else {
#pragma unroll
		for (int j = 0; j < N; j++)
			p[j] = from_f32<T>(f[j]);
	}
}

struct rope_args {
	const void *x, *cos, *sin;
	void *y;
	int64_t rows;   /* B*H*S */
	int S, half;    /* half = D/2 */
};

/* The VP pairs (a_j, b_j) of a chunk, at v[2j], v[2j+1], from x + xo:
 * interleaved, or VP a's there and VP b's half a row further (HALF). */
template <typename T, int VP, bool HALF>
static __device__ __forceinline__ void load_pairs(const T *x, int half,
						  float *v)
{
	if constexpr (HALF) {
		float a[VP], b[VP];

		load_n<T, VP, (VP > 1)>(x, a);
		load_n<T, VP, (VP > 1)>(x + half, b);
#pragma unroll
		for (int j = 0; j < VP; j++) {
			v[2 * j] = a[j];
			v[2 * j + 1] = b[j];
		}
	} else {
		load_n<T, 2 * VP, (VP > 1)>(x, v);
	}
}

template <typename T, int VP, bool HALF>
static __device__ __forceinline__ void store_pairs(T *y, int half,
						   const float *v)
{
	if constexpr (HALF) {
		float a[VP], b[VP];

#pragma unroll
		for (int j = 0; j < VP; j++) {
			a[j] = v[2 * j];
			b[j] = v[2 * j + 1];
		}
		store_n<T, VP, (VP > 1)>(y, a);
		store_n<T, VP, (VP > 1)>(y + half, b);
	} else {
		store_n<T, 2 * VP, (VP > 1)>(y, v);
	}
}

/* VP pairs per work item; VP > 1 only when every access is aligned. */
template <typename T, int VP, bool HALF>
__global__ void __launch_bounds__(BLOCK) rope(struct rope_args p)
{
	const T *x = (const T *)p.x, *cs = (const T *)p.cos, *sn = (const T *)p.sin;
	T *y = (T *)p.y;
	const int64_t r0 = (int64_t)blockIdx.x * ROWS;
	const int nrows = (int)min((int64_t)ROWS, p.rows - r0);
	const int cpr = p.half / VP;            /* chunks per row */
	const int s0 = (int)(r0 % p.S);

	for (int w = threadIdx.x; w < nrows * cpr; w += BLOCK) {
		const int rl = w / cpr, c = w - rl * cpr;
		const int s = (s0 + rl) % p.S;
		const int64_t xo = (r0 + rl) * 2 * p.half +
				   (int64_t)c * (HALF ? 1 : 2) * VP;
		const int64_t co = (int64_t)s * p.half + (int64_t)c * VP;
		float v[2 * VP], cf[VP], sf[VP];

		load_pairs<T, VP, HALF>(x + xo, p.half, v);
		load_n<T, VP, (VP > 1)>(cs + co, cf);
		load_n<T, VP, (VP > 1)>(sn + co, sf);
#pragma unroll
		for (int j = 0; j < VP; j++) {
			const float a = v[2 * j], b = v[2 * j + 1];
			v[2 * j] = a * cf[j] - b * sf[j];
			v[2 * j + 1] = a * sf[j] + b * cf[j];
		}
		store_pairs<T, VP, HALF>(y + xo, p.half, v);
	}
}

static bool aligned(const void *p, uintptr_t n)
{
	return ((uintptr_t)p & (n - 1)) == 0;
}

template <typename T>
static int run(const struct ak_args *a)
{
	const struct ak_tensor *xt = &a->in[0];
	struct rope_args p;
	constexpr int VP = 8 / sizeof(T);       /* 16 bytes of x per chunk */

	if (xt->ndim != 4 || xt->shape[3] % 2 != 0)
		return -1;
	if (a->scalar[0] != 0 && a->scalar[0] != 1)
		return -1;                      /* no such layout */
	p.x = xt->data;
	p.cos = a->in[1].data;
	p.sin = a->in[2].data;
	p.y = a->out[0].data;
	p.S = (int)xt->shape[2];
	p.half = (int)(xt->shape[3] / 2);
	p.rows = xt->shape[0] * xt->shape[1] * xt->shape[2];
	if (p.rows == 0 || p.half == 0)
		return 0;

	const int64_t grid = (p.rows + ROWS - 1) / ROWS;
	hipStream_t st = (hipStream_t)a->stream;
	const bool vec = p.half % VP == 0 && aligned(p.x, 16) &&
			 aligned(p.y, 16) && aligned(p.cos, 8) &&
			 aligned(p.sin, 8);
	if (vec && a->scalar[0] == 1)
		rope<T, VP, true><<<grid, BLOCK, 0, st>>>(p);
	else if (vec)
		rope<T, VP, false><<<grid, BLOCK, 0, st>>>(p);
	else if (a->scalar[0] == 1)
		rope<T, 1, true><<<grid, BLOCK, 0, st>>>(p);
	else
		rope<T, 1, false><<<grid, BLOCK, 0, st>>>(p);
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
