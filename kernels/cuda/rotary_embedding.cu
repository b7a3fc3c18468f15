/*
 * rotary_embedding: for each row (b,h,s) of x[B,H,S,D] and pair i < D/2,
 * with (a, b) = (x[..,2i], x[..,2i+1]) interleaved (scalar[0] = 0) or
 * (x[..,i], x[..,i+D/2]) half-split (scalar[0] = 1, rotate_half's pairs):
 *   a' = a cos[s,i] - b sin[s,i],  b' = a sin[s,i] + b cos[s,i].
 *
 * Why it is fast: it is a copy with a little arithmetic, so it is written
 * like one.  x is viewed as a flat array of chunks of VP pairs (16 bytes
 * of x: one load interleaved, two 8-byte loads from the two halves of the
 * row half-split); a block owns BLOCK * ITEMS consecutive chunks and each
 * thread issues its ITEMS loads of x (coalesced across the warp, skipping
 * L1) and its 8-byte loads of cos and sin (S x D/2 is small: they stay in
 * L2 and L1) before it does any arithmetic, so many bytes are in flight
 * per SM.  The row and position of a chunk come from multiply-shift
 * division by constants computed on the host, not from integer division.
 * f32 math, y written once with stores as wide as the loads.  Shapes whose
 * D/2 is not a multiple of VP, or misaligned pointers, take the same kernel
 * one pair at a time.
 */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>
#include "autokernel.h"

#define BLOCK 256  /* autokernel: tune 64,128,256,512 */
#define ITEMS 2    /* autokernel: tune 1,2,4,8 */
#define STREAM 1   /* autokernel: tune 0,1 */

static __device__ __forceinline__ float to_f32(float x) { return x; }
static __device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }
static __device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> static __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_f32<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

/* Two floats rounded to T and packed in 32 bits. */
template <typename T> static __device__ __forceinline__ uint32_t pack2(float a, float b);
template <> __device__ __forceinline__ uint32_t pack2<__half>(float a, float b)
{
	__half2 h = __floats2half2_rn(a, b);
	return *reinterpret_cast<uint32_t *>(&h);
}
template <> __device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float a, float b)
{
	__nv_bfloat162 h = __floats2bfloat162_rn(a, b);
	return *reinterpret_cast<uint32_t *>(&h);
}

/* 16 bytes of x, read once: skip L1 so that cos and sin stay there. */
static __device__ __forceinline__ uint4 ld_x(const void *p)
{
	uint4 u;
	if (STREAM)
		asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
		    : "=r"(u.x), "=r"(u.y), "=r"(u.z), "=r"(u.w) : "l"(p));
	else
		u = __ldg(reinterpret_cast<const uint4 *>(p));
	return u;
}

/* 8 bytes of x (half a chunk, half-split), read once. */
static __device__ __forceinline__ uint2 ld_x8(const void *p)
{
	uint2 u;
	if (STREAM)
		asm("ld.global.nc.L1::no_allocate.v2.u32 {%0,%1}, [%2];"
		    : "=r"(u.x), "=r"(u.y) : "l"(p));
	else
		u = __ldg(reinterpret_cast<const uint2 *>(p));
	return u;
}

/* n / d and n % d for n < 2^31 by multiply and shift (d fixed per launch). */
struct fastdiv {
	uint32_t d, mul, shift;
};

static struct fastdiv fastdiv_make(uint32_t d)
{
	struct fastdiv f;
	uint32_t l = 0;

	while (l < 32 && ((uint64_t)1 << l) < d)
		l++;
	f.d = d;
	f.shift = l;
	f.mul = (uint32_t)((((uint64_t)1 << 32) * (((uint64_t)1 << l) - d)) / d + 1);
	return f;
}

static __device__ __forceinline__ uint32_t fdiv(uint32_t n, const struct fastdiv &f)
{
	return (__umulhi(n, f.mul) + n) >> f.shift;
}

struct rope_args {
	const void *x, *cos, *sin;
	void *y;
	int64_t chunks;         /* chunks of VP pairs in x */
	struct fastdiv cpr, S;  /* chunks per row, sequence length */
	int half;               /* D/2 */
};

/*
 * Where a chunk's VP pairs lie in x: the 2 VP elements from x + *a
 * (interleaved), or VP from x + *a and VP from x + *b (half-split).
 */
template <int VP, bool HALF>
static __device__ __forceinline__ void chunk_at(int64_t c, int64_t row,
						int64_t col, int half,
						int64_t *a, int64_t *b)
{
	if (HALF) {
		*a = row * 2 * half + col * VP;
		*b = *a + half;
	} else {
		*a = c * 2 * VP;
		*b = *a + 1;
	}
}

/* The rotated pairs o[2j], o[2j+1] to the two halves: 8 bytes each. */
template <typename T, int VP>
static __device__ __forceinline__ void store_half(T *ya, T *yb, const float *o)
{
	if constexpr (sizeof(T) == 4) {
		*reinterpret_cast<float2 *>(ya) = make_float2(o[0], o[2]);
		*reinterpret_cast<float2 *>(yb) = make_float2(o[1], o[3]);
	} else {
		uint2 a, b;
		a.x = pack2<T>(o[0], o[2]);
		a.y = pack2<T>(o[4], o[6]);
		b.x = pack2<T>(o[1], o[3]);
		b.y = pack2<T>(o[5], o[7]);
		*reinterpret_cast<uint2 *>(ya) = a;
		*reinterpret_cast<uint2 *>(yb) = b;
	}
}

/*
 * VP pairs per chunk (16 bytes of x when VP > 1; then every access is
 * aligned).  BIG: the chunk count may exceed 2^31, so divide in 64 bits.
 * HALF: the half-split layout.
 */
template <typename T, int VP, bool BIG, bool FULL, bool HALF>
static __device__ __forceinline__ void rope_block(const struct rope_args &p)
{
	const T *__restrict__ x = (const T *)p.x;
	const T *__restrict__ cs = (const T *)p.cos;
	const T *__restrict__ sn = (const T *)p.sin;
	T *__restrict__ y = (T *)p.y;
	const int64_t c0 = (int64_t)blockIdx.x * (BLOCK * ITEMS) + threadIdx.x;
	float v[ITEMS][2 * VP], cf[ITEMS][VP], sf[ITEMS][VP];
	int64_t xa[ITEMS], xb[ITEMS];

#pragma unroll
	for (int k = 0; k < ITEMS; k++) {
		const int64_t c = c0 + (int64_t)k * BLOCK;
		int64_t row, s, col;

		if (!FULL && c >= p.chunks)
			continue;
		if (BIG) {
			row = c / p.cpr.d;
			s = row % p.S.d;
		} else {
			row = fdiv((uint32_t)c, p.cpr);
			s = (uint32_t)row - fdiv((uint32_t)row, p.S) * p.S.d;
		}
		col = c - row * p.cpr.d;            /* chunk within the row */
		const int64_t co = s * p.half + col * VP;

		chunk_at<VP, HALF>(c, row, col, p.half, &xa[k], &xb[k]);
		if constexpr (VP > 1) {
			if constexpr (HALF) {
				const uint2 ua = ld_x8(x + xa[k]);
				const uint2 ub = ld_x8(x + xb[k]);
				const T *ea = reinterpret_cast<const T *>(&ua);
				const T *eb = reinterpret_cast<const T *>(&ub);
#pragma unroll
				for (int j = 0; j < VP; j++) {
					v[k][2 * j] = to_f32(ea[j]);
					v[k][2 * j + 1] = to_f32(eb[j]);
				}
			} else {
				const uint4 u = ld_x(x + xa[k]);
				const T *e = reinterpret_cast<const T *>(&u);
#pragma unroll
				for (int j = 0; j < 2 * VP; j++)
					v[k][j] = to_f32(e[j]);
			}
			if constexpr (sizeof(T) == 2) {
				const uint2 cu = __ldg(reinterpret_cast<const uint2 *>(cs + co));
				const uint2 su = __ldg(reinterpret_cast<const uint2 *>(sn + co));
				const T *ce = reinterpret_cast<const T *>(&cu);
				const T *se = reinterpret_cast<const T *>(&su);
#pragma unroll
				for (int j = 0; j < VP; j++) {
					cf[k][j] = to_f32(ce[j]);
					sf[k][j] = to_f32(se[j]);
				}
			} else {
				const float2 cu = __ldg(reinterpret_cast<const float2 *>(cs + co));
				const float2 su = __ldg(reinterpret_cast<const float2 *>(sn + co));
				cf[k][0] = cu.x;
				cf[k][1] = cu.y;
				sf[k][0] = su.x;
				sf[k][1] = su.y;
			}
		} else {
			v[k][0] = to_f32(x[xa[k]]);
			v[k][1] = to_f32(x[xb[k]]);
			cf[k][0] = to_f32(cs[co]);
			sf[k][0] = to_f32(sn[co]);
		}
	}
#pragma unroll
	for (int k = 0; k < ITEMS; k++) {
		const int64_t c = c0 + (int64_t)k * BLOCK;
		float o[2 * VP];

		if (!FULL && c >= p.chunks)
			continue;
#pragma unroll
		for (int j = 0; j < VP; j++) {
			const float a = v[k][2 * j], b = v[k][2 * j + 1];
			o[2 * j] = a * cf[k][j] - b * sf[k][j];
			o[2 * j + 1] = a * sf[k][j] + b * cf[k][j];
		}
		if constexpr (VP == 1) {
			y[xa[k]] = from_f32<T>(o[0]);
			y[xb[k]] = from_f32<T>(o[1]);
		} else if constexpr (HALF) {
			store_half<T, VP>(y + xa[k], y + xb[k], o);
		} else if constexpr (sizeof(T) == 4) {
			*reinterpret_cast<float4 *>(y + xa[k]) =
				make_float4(o[0], o[1], o[2], o[3]);
		} else {
			uint4 u;
			u.x = pack2<T>(o[0], o[1]);
			u.y = pack2<T>(o[2], o[3]);
			u.z = pack2<T>(o[4], o[5]);
			u.w = pack2<T>(o[6], o[7]);
			*reinterpret_cast<uint4 *>(y + xa[k]) = u;
		}
	}
}

/* Whole blocks take the unguarded path: no branch between their loads. */
template <typename T, int VP, bool BIG, bool HALF>
__global__ void __launch_bounds__(BLOCK) rope(struct rope_args p)
{
	if ((int64_t)(blockIdx.x + 1) * (BLOCK * ITEMS) <= p.chunks)
		rope_block<T, VP, BIG, true, HALF>(p);
	else
		rope_block<T, VP, BIG, false, HALF>(p);
}

static bool aligned(const void *p, uintptr_t n)
{
	return ((uintptr_t)p & (n - 1)) == 0;
}

template <typename T, int VP, bool HALF>
static void launch(struct rope_args &p, cudaStream_t st)
{
	const int64_t rows = p.chunks / (p.half / VP);
	const int64_t grid = (p.chunks + BLOCK * ITEMS - 1) / (BLOCK * ITEMS);

	p.cpr = fastdiv_make((uint32_t)(p.half / VP));
	if (p.chunks < ((int64_t)1 << 31) && rows < ((int64_t)1 << 31))
		rope<T, VP, false, HALF><<<grid, BLOCK, 0, st>>>(p);
	else
		rope<T, VP, true, HALF><<<grid, BLOCK, 0, st>>>(p);
}

template <typename T, bool HALF>
static void launch_any(struct rope_args &p, int64_t rows, cudaStream_t st)
{
	constexpr int VP = 8 / sizeof(T);       /* 16 bytes of x per chunk */

	if (p.half % VP == 0 && aligned(p.x, 16) && aligned(p.y, 16) &&
	    aligned(p.cos, 8) && aligned(p.sin, 8)) {
		p.chunks = rows * (p.half / VP);
		launch<T, VP, HALF>(p, st);
	} else {
		p.chunks = rows * p.half;
		launch<T, 1, HALF>(p, st);
	}
}

template <typename T>
static int run(const struct ak_args *a)
{
	const struct ak_tensor *xt = &a->in[0];
	struct rope_args p;

	if (xt->ndim != 4 || xt->shape[3] % 2 != 0)
		return -1;
	if (a->scalar[0] != 0 && a->scalar[0] != 1)
		return -1;                      /* no such layout */
	p.x = xt->data;
	p.cos = a->in[1].data;
	p.sin = a->in[2].data;
	p.y = a->out[0].data;
	p.half = (int)(xt->shape[3] / 2);
	const int64_t rows = xt->shape[0] * xt->shape[1] * xt->shape[2];
	if (rows == 0 || p.half == 0)
		return 0;
	if (xt->shape[2] >= ((int64_t)1 << 31) || p.half >= (1 << 30))
		return -1;
	p.S = fastdiv_make((uint32_t)xt->shape[2]);

	cudaStream_t st = (cudaStream_t)a->stream;
	if (a->scalar[0] == 1)
		launch_any<T, true>(p, rows, st);
	else
		launch_any<T, false>(p, rows, st);
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
