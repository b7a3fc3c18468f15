/*
 * layernorm: y = (x - mean) / sqrt(var + eps) * w + b per row, biased
 * variance, f32 math.
 *
 * Why it is fast: one pass over HBM with everything in flight early.  A
 * group of GROUP threads owns ROWS rows (a block holds BLOCK/GROUP groups);
 * each thread issues all its 16-byte loads of x for those rows at once
 * (predicated, no branches between them) and keeps the row in registers,
 * then loads its slice of w and b (which stay in L1: x loads skip L1).  Mean and variance
 * come from ONE group reduction: each thread takes the exact two-pass mean
 * and sum of squared deviations of its own values from registers, and the
 * (count, mean, M2) triples are merged with Chan's formula over warp
 * shuffles and then, for groups wider than a warp, over the group's warps
 * in a fixed order.  That is stable on large and mixed-scale rows (no
 * E[x^2] - E[x]^2), costs one barrier instead of four, and is bitwise
 * deterministic.  y is written once, 16 bytes per access.
 *
 * Rows that are not a multiple of 16 bytes (or misaligned pointers) take the
 * same kernel one element per access; rows too long for registers take a
 * streaming kernel that reads x three times (mean, squared deviations,
 * output).  With too few rows to fill the machine, a block holds one group.
 */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>
#include "autokernel.h"

#define BLOCK 256  /* autokernel: tune 64,128,256,512 */
#define GROUP 64   /* autokernel: tune 32,64,128,256 if GROUP <= BLOCK */
#define ROWS 1     /* autokernel: tune 1,2,4 */
#define WB_EARLY 1 /* autokernel: tune 0,1 */

#define MAX_REGS 64     /* registers of packed row data a thread may hold */

static __device__ __forceinline__ float to_f32(float x) { return x; }
static __device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }
static __device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> static __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_f32<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

/* Two floats rounded to T and packed in 32 bits (or one float's bits). */
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

/*
 * 16 bytes at p when ok, else zeros: one predicated load, no branch, so
 * the compiler can issue every load of a thread back to back.  STREAM: the
 * data is read once, so it skips L1 (which then keeps w and b).
 */
template <bool STREAM>
static __device__ __forceinline__ uint4 ld16(const void *p, bool ok)
{
	uint4 u;
	if (STREAM)
		asm("{\n\t.reg .pred q;\n\tsetp.ne.b32 q, %5, 0;\n\t"
		    "mov.b32 %0, 0;\n\tmov.b32 %1, 0;\n\tmov.b32 %2, 0;\n\tmov.b32 %3, 0;\n\t"
		    "@q ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n\t}"
		    : "=r"(u.x), "=r"(u.y), "=r"(u.z), "=r"(u.w) : "l"(p), "r"((int)ok));
	else
		asm("{\n\t.reg .pred q;\n\tsetp.ne.b32 q, %5, 0;\n\t"
		    "mov.b32 %0, 0;\n\tmov.b32 %1, 0;\n\tmov.b32 %2, 0;\n\tmov.b32 %3, 0;\n\t"
		    "@q ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];\n\t}"
		    : "=r"(u.x), "=r"(u.y), "=r"(u.z), "=r"(u.w) : "l"(p), "r"((int)ok));
	return u;
}

/* VEC elements of T as held in registers: one 16-byte word, or one T. */
template <typename T, int VEC> struct pack { uint4 u; };
template <typename T> struct pack<T, 1> { T u; };

/* VEC elements at p when ok (else zeros); STREAM: skip L1. */
template <typename T, int VEC, bool STREAM>
static __device__ __forceinline__ pack<T, VEC> ld(const T *p, bool ok)
{
	pack<T, VEC> r;
	if constexpr (VEC == 1)
		r.u = ok ? __ldg(p) : from_f32<T>(0.f);
	else
		r.u = ld16<STREAM>(p, ok);
	return r;
}

template <typename T, int VEC>
static __device__ __forceinline__ float get(const pack<T, VEC> &r, int j)
{
	if constexpr (VEC == 1)
		return to_f32(r.u);
	else
		return to_f32(reinterpret_cast<const T *>(&r.u)[j]);
}

template <typename T, int VEC>
static __device__ __forceinline__ void st(T *p, const float *f)
{
	if constexpr (VEC == 1) {
		p[0] = from_f32<T>(f[0]);
	} else if constexpr (sizeof(T) == 4) {
		*reinterpret_cast<float4 *>(p) = make_float4(f[0], f[1], f[2], f[3]);
	} else {
		uint4 u;
		u.x = pack2<T>(f[0], f[1]);
		u.y = pack2<T>(f[2], f[3]);
		u.z = pack2<T>(f[4], f[5]);
		u.w = pack2<T>(f[6], f[7]);
		*reinterpret_cast<uint4 *>(p) = u;
	}
}

/*
 * Chan's merge of (n, mean, M2) with (nb, mb, qb).  Products are rounded
 * separately (no contraction), so both lanes of a butterfly get the same
 * bits whichever side they hold.
 */
static __device__ __forceinline__ void chan(float &n, float &m, float &q,
					    float nb, float mb, float qb)
{
	const float nn = n + nb, d = mb - m;

	if (nn > 0.f) {
		m = __fdiv_rn(__fmul_rn(n, m) + __fmul_rn(nb, mb), nn);
		q = q + qb + __fmul_rn(__fmul_rn(d, d), __fdiv_rn(__fmul_rn(n, nb), nn));
	}
	n = nn;
}

/*
 * Merges the statistics of RW rows over the GROUP consecutive threads that
 * own them; every thread of the group ends with the same bits.  All
 * threads of the block must call it, once.
 */
template <int RW>
static __device__ __forceinline__ void group_stats(float (&n)[RW], float (&m)[RW],
						   float (&q)[RW])
{
	constexpr int W = GROUP < 32 ? GROUP : 32;
#pragma unroll
	for (int o = W / 2; o > 0; o /= 2)
#pragma unroll
		for (int r = 0; r < RW; r++) {
			const float nb = __shfl_xor_sync(0xffffffffu, n[r], o);
			const float mb = __shfl_xor_sync(0xffffffffu, m[r], o);
			const float qb = __shfl_xor_sync(0xffffffffu, q[r], o);
			chan(n[r], m[r], q[r], nb, mb, qb);
		}
	if constexpr (GROUP > 32) {
		constexpr int NW = GROUP / 32;
		__shared__ float red[3][RW][BLOCK / 32];
		const int warp = threadIdx.x / 32, first = warp / NW * NW;

		if (threadIdx.x % 32 == 0)
#pragma unroll
			for (int r = 0; r < RW; r++) {
				red[0][r][warp] = n[r];
				red[1][r][warp] = m[r];
				red[2][r][warp] = q[r];
			}
		__syncthreads();
#pragma unroll
		for (int r = 0; r < RW; r++) {
			n[r] = red[0][r][first];
			m[r] = red[1][r][first];
			q[r] = red[2][r][first];
#pragma unroll
			for (int i = 1; i < NW; i++)
				chan(n[r], m[r], q[r], red[0][r][first + i],
				     red[1][r][first + i], red[2][r][first + i]);
		}
	}
}

struct ln_args {
	const void *x, *w, *b;
	void *y;
	int64_t R, C;
	float eps;
};

/* RW rows per group in registers: ITEMS packs of VEC elements per row. */
template <typename T, int VEC, int RW, int ITEMS>
__global__ void __launch_bounds__(BLOCK) layernorm_regs(struct ln_args p)
{
	const T *__restrict__ x = (const T *)p.x;
	const T *__restrict__ w = (const T *)p.w;
	const T *__restrict__ b = (const T *)p.b;
	T *__restrict__ y = (T *)p.y;
	const int t = threadIdx.x % GROUP;
	const int64_t row0 = ((int64_t)blockIdx.x * (blockDim.x / GROUP) +
			      threadIdx.x / GROUP) * RW;
	const int64_t nv = p.C / VEC;
	pack<T, VEC> v[RW][ITEMS], wv[ITEMS], bv[ITEMS];
	float n[RW], m[RW], q[RW];

#pragma unroll
	for (int r = 0; r < RW; r++)
#pragma unroll
		for (int k = 0; k < ITEMS; k++) {
			const int64_t i = (int64_t)k * GROUP + t;
			v[r][k] = ld<T, VEC, true>(x + (row0 + r) * p.C + i * VEC,
						   row0 + r < p.R && i < nv);
		}
	if (WB_EARLY)
#pragma unroll
		for (int k = 0; k < ITEMS; k++) {
			const int64_t i = (int64_t)k * GROUP + t;
			wv[k] = ld<T, VEC, false>(w + i * VEC, i < nv);
			bv[k] = ld<T, VEC, false>(b + i * VEC, i < nv);
		}

	/* This thread's exact two-pass mean and M2, from registers. */
	int items = 0;
#pragma unroll
	for (int k = 0; k < ITEMS; k++)
		items += (int64_t)k * GROUP + t < nv;
#pragma unroll
	for (int r = 0; r < RW; r++) {
		float s = 0.f, d = 0.f;
#pragma unroll
		for (int k = 0; k < ITEMS; k++)
			if (k < items)
#pragma unroll
				for (int j = 0; j < VEC; j++)
					s += get<T, VEC>(v[r][k], j);
		n[r] = (float)(items * VEC);
		m[r] = items ? s / n[r] : 0.f;
#pragma unroll
		for (int k = 0; k < ITEMS; k++)
			if (k < items)
#pragma unroll
				for (int j = 0; j < VEC; j++) {
					const float e = get<T, VEC>(v[r][k], j) - m[r];
					d = fmaf(e, e, d);
				}
		q[r] = d;
	}
	group_stats<RW>(n, m, q);

	if (!WB_EARLY)
#pragma unroll
		for (int k = 0; k < ITEMS; k++) {
			const int64_t i = (int64_t)k * GROUP + t;
			wv[k] = ld<T, VEC, false>(w + i * VEC, i < nv);
			bv[k] = ld<T, VEC, false>(b + i * VEC, i < nv);
		}
#pragma unroll
	for (int r = 0; r < RW; r++) {
		const float rstd = rsqrtf(q[r] / (float)p.C + p.eps);
		if (row0 + r >= p.R)
			continue;
#pragma unroll
		for (int k = 0; k < ITEMS; k++) {
			const int64_t i = (int64_t)k * GROUP + t;
			float f[VEC];

			if (i >= nv)
				continue;
#pragma unroll
			for (int j = 0; j < VEC; j++)
				f[j] = fmaf((get<T, VEC>(v[r][k], j) - m[r]) * rstd,
					    get<T, VEC>(wv[k], j), get<T, VEC>(bv[k], j));
			st<T, VEC>(y + (row0 + r) * p.C + i * VEC, f);
		}
	}
}

/*
 * Rows too long for registers: a mean pass, a pass for the squared
 * deviations from that mean (two-pass, exact), then the output pass.
 */
template <typename T, int VEC>
__global__ void __launch_bounds__(BLOCK) layernorm_long(struct ln_args p)
{
	const T *__restrict__ x = (const T *)p.x;
	const T *__restrict__ w = (const T *)p.w;
	const T *__restrict__ b = (const T *)p.b;
	T *__restrict__ y = (T *)p.y;
	const int64_t row = (int64_t)blockIdx.x * (blockDim.x / GROUP) + threadIdx.x / GROUP;
	const int t = threadIdx.x % GROUP;
	const bool live = row < p.R;
	const int64_t nv = live ? p.C / VEC : 0, off = (live ? row : 0) * p.C;
	float n[1], m[1], q[1], s = 0.f;

	for (int64_t i = t; i < nv; i += GROUP) {
		const pack<T, VEC> u = ld<T, VEC, false>(x + off + i * VEC, true);
#pragma unroll
		for (int j = 0; j < VEC; j++)
			s += get<T, VEC>(u, j);
	}
	/* (count, this thread's mean, 0) merge to the row mean. */
	n[0] = (float)((nv > t ? (nv - t + GROUP - 1) / GROUP : 0) * VEC);
	m[0] = n[0] > 0.f ? s / n[0] : 0.f;
	q[0] = 0.f;
	group_stats<1>(n, m, q);
	const float mean = m[0];
	float d = 0.f;
	for (int64_t i = t; i < nv; i += GROUP) {
		const pack<T, VEC> u = ld<T, VEC, false>(x + off + i * VEC, true);
#pragma unroll
		for (int j = 0; j < VEC; j++) {
			const float e = get<T, VEC>(u, j) - mean;
			d = fmaf(e, e, d);
		}
	}
	/* (1, 0, d) merge to the sum of the d: all means equal, no cross term. */
	n[0] = 1.f;
	m[0] = 0.f;
	q[0] = d;
	__syncthreads();        /* the first merge's shared slots are read */
	group_stats<1>(n, m, q);
	const float rstd = rsqrtf(q[0] / (float)p.C + p.eps);
	for (int64_t i = t; i < nv; i += GROUP) {
		const pack<T, VEC> u = ld<T, VEC, false>(x + off + i * VEC, true);
		const pack<T, VEC> wu = ld<T, VEC, false>(w + i * VEC, true);
		const pack<T, VEC> bu = ld<T, VEC, false>(b + i * VEC, true);
		float f[VEC];
#pragma unroll
		for (int j = 0; j < VEC; j++)
			f[j] = fmaf((get<T, VEC>(u, j) - mean) * rstd,
				    get<T, VEC>(wu, j), get<T, VEC>(bu, j));
		st<T, VEC>(y + off + i * VEC, f);
	}
}

/* Multiprocessors of the current device (asked once). */
static int sm_count(void)
{
	static int n;
	int dev;

	if (!n && (cudaGetDevice(&dev) != cudaSuccess ||
		   cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess))
		n = 132;
	return n;
}

/*
 * Threads per block: BLOCK, or one group when there are too few rows to
 * give every multiprocessor two blocks (16 x 8192: 16 blocks, not 4).
 */
static int block_for(int64_t rows, int rows_per_group)
{
	const int64_t per_block = BLOCK / GROUP * rows_per_group;

	return (rows + per_block - 1) / per_block < 2 * sm_count() ? GROUP : BLOCK;
}

/*
 * Launches the register kernel with the smallest ITEMS that holds the row
 * (RW rows per group), or returns false when the row does not fit.
 */
template <typename T, int VEC, int RW, int ITEMS>
static bool launch_regs(int64_t per, cudaStream_t st, const struct ln_args &p)
{
	constexpr int regs = VEC == 1 ? 1 : 4;
	constexpr int max_items = VEC == 1 ? 8 : MAX_REGS / 4;

	if constexpr (RW * ITEMS * regs <= MAX_REGS && ITEMS <= max_items) {
		if (per <= ITEMS) {
			const int block = block_for(p.R, RW);
			const int64_t rows = block / GROUP * RW;
			const int64_t grid = (p.R + rows - 1) / rows;
			layernorm_regs<T, VEC, RW, ITEMS><<<grid, block, 0, st>>>(p);
			return true;
		}
		return launch_regs<T, VEC, RW, ITEMS * 2>(per, st, p);
	}
	return false;
}

template <typename T, int VEC>
static void launch(cudaStream_t st, const struct ln_args &p)
{
	const int64_t per = (p.C / VEC + GROUP - 1) / GROUP;
	constexpr int rw = VEC == 1 ? 1 : ROWS;

	if (launch_regs<T, VEC, rw, 1>(per, st, p))
		return;
	if (rw > 1 && launch_regs<T, VEC, 1, 1>(per, st, p))
		return;
	const int block = block_for(p.R, 1);
	const int64_t grid = (p.R + block / GROUP - 1) / (block / GROUP);
	layernorm_long<T, VEC><<<grid, block, 0, st>>>(p);
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

	cudaStream_t st = (cudaStream_t)a->stream;
	if (p.C % V == 0 && aligned16(p.x) && aligned16(p.w) &&
	    aligned16(p.b) && aligned16(p.y))
		launch<T, V>(st, p);
	else
		launch<T, 1>(st, p);
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
