/*
 * cross_entropy: loss = mean over n of logsumexp(logits[n,:]) -
 * logits[n,target[n]], f32 math, f32 scalar output.
 *
 * Why it is fast: one read of the logits, one launch.  A group of GROUP
 * threads owns a row (BLOCK/GROUP rows per block) and streams it with an
 * online logsumexp: per trip a thread issues UNROLL 16-byte loads (skipping
 * L1), takes the trip's max, rescales its running sum once per trip (not
 * per element) and adds exp2((x - max) * log2(e)), one MUFU op per logit
 * (x - max is exact, so large logits lose nothing).  The target logit is fetched at the start of the row, so
 * its latency hides under the stream.  The group merges its (max, sum)
 * pairs in one butterfly (one barrier for groups wider than a warp).  Each
 * row's loss goes to the workspace; the last block to finish (an integer
 * ticket in a module variable that the last block resets to zero) sums
 * the N losses in a fixed order and divides by N: no second launch and no
 * float atomics, so the result is bitwise deterministic.
 */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>
#include <type_traits>
#include "autokernel.h"

#define BLOCK 512  /* autokernel: tune 128,256,512,1024 */
#define GROUP 512  /* autokernel: tune 64,128,256,512,1024 if GROUP <= BLOCK */
#define UNROLL 8   /* autokernel: tune 2,4,8,16 */

#define L2E 1.4426950408889634f

static __device__ __forceinline__ float to_f32(float x) { return x; }
static __device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }
static __device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }

/*
 * 16 bytes at p when ok, else zeros: one predicated load, no branch, so
 * the compiler can issue every load of a thread back to back.  x is read
 * once: no L1 allocation.
 */
static __device__ __forceinline__ uint4 ld_stream(const void *p, bool ok)
{
	uint4 u;
	asm("{\n\t.reg .pred q;\n\tsetp.ne.b32 q, %5, 0;\n\t"
	    "mov.b32 %0, 0;\n\tmov.b32 %1, 0;\n\tmov.b32 %2, 0;\n\tmov.b32 %3, 0;\n\t"
	    "@q ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n\t}"
	    : "=r"(u.x), "=r"(u.y), "=r"(u.z), "=r"(u.w) : "l"(p), "r"((int)ok));
	return u;
}

/* 2^x on the special-function unit (ex2.approx: 2 ulp, -inf gives +0). */
static __device__ __forceinline__ float ex2(float x)
{
	float y;
	asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
	return y;
}

/* VEC elements of T as held in registers: one 16-byte word, or one T. */
template <typename T, int VEC> struct pack { uint4 u; };
template <typename T> struct pack<T, 1> { T u; };

template <typename T, int VEC>
static __device__ __forceinline__ float get(const pack<T, VEC> &r, int j)
{
	if constexpr (VEC == 1)
		return to_f32(r.u);
	else
		return to_f32(reinterpret_cast<const T *>(&r.u)[j]);
}

/*
 * Merges (m, s) with (mb, sb): sums of exp2(x*log2e - m*log2e).  -inf
 * maxima mean "nothing seen" and contribute nothing.
 */
static __device__ __forceinline__ void lse_merge(float &m, float &s, float mb, float sb)
{
	const float mm = fmaxf(m, mb);

	if (mm == -INFINITY)
		return;
	s = s * ex2((m - mm) * L2E) + sb * ex2((mb - mm) * L2E);
	m = mm;
}

/* Merges (m, s) over the GROUP consecutive threads of a row. */
static __device__ __forceinline__ void group_lse(float &m, float &s)
{
	constexpr int W = GROUP < 32 ? GROUP : 32;
#pragma unroll
	for (int o = W / 2; o > 0; o /= 2) {
		const float mb = __shfl_xor_sync(0xffffffffu, m, o);
		const float sb = __shfl_xor_sync(0xffffffffu, s, o);
		lse_merge(m, s, mb, sb);
	}
	if constexpr (GROUP > 32) {
		constexpr int NW = GROUP / 32;
		__shared__ float red[2][BLOCK / 32];
		const int warp = threadIdx.x / 32, first = warp / NW * NW;

		if (threadIdx.x % 32 == 0) {
			red[0][warp] = m;
			red[1][warp] = s;
		}
		__syncthreads();
		m = red[0][first];
		s = red[1][first];
#pragma unroll
		for (int i = 1; i < NW; i++)
			lse_merge(m, s, red[0][first + i], red[1][first + i]);
	}
}

/* Elementwise max of two words of 8 halves (f16 or bf16). */
template <typename T>
static __device__ __forceinline__ uint4 max8(uint4 a, uint4 b)
{
	using T2 = typename std::conditional<std::is_same<T, __half>::value,
					     __half2, __nv_bfloat162>::type;
	uint4 r;
	const T2 *x = reinterpret_cast<const T2 *>(&a), *y = reinterpret_cast<const T2 *>(&b);
	T2 *z = reinterpret_cast<T2 *>(&r);
#pragma unroll
	for (int j = 0; j < 4; j++)
		z[j] = __hmax2(x[j], y[j]);
	return r;
}

/*
 * One trip of a thread over its row: UNROLL loads GROUP packs apart, all
 * issued first; then the trip's max, one rescale of the running sum, and
 * one exp2 per logit.  FULL: every load in range, no masks.  The first
 * load of a trip is always in range, so the trip max is finite for finite
 * logits.
 */
template <typename T, int VEC, bool FULL>
static __device__ __forceinline__ void trip(const T *__restrict__ xr, int64_t base,
					    int64_t nv, float &m, float &s)
{
	pack<T, VEC> f[UNROLL];
	float cm = -INFINITY;

#pragma unroll
	for (int u = 0; u < UNROLL; u++) {
		const int64_t i = base + (int64_t)u * GROUP;
		if constexpr (VEC == 1)
			f[u].u = FULL || i < nv ? xr[i] : xr[0];
		else
			f[u].u = ld_stream(xr + i * VEC, FULL || i < nv);
	}
	if constexpr (VEC > 1 && sizeof(T) == 2) {
		/* Packed max on the raw halves: exact, half the instructions,
		 * and no float copies of the logits kept alive. */
		uint4 mx = f[0].u;
#pragma unroll
		for (int u = 1; u < UNROLL; u++)
			if (FULL || base + (int64_t)u * GROUP < nv)
				mx = max8<T>(mx, f[u].u);
		pack<T, VEC> p;
		p.u = max8<T>(mx, make_uint4(mx.z, mx.w, mx.x, mx.y));
		cm = fmaxf(fmaxf(get<T, VEC>(p, 0), get<T, VEC>(p, 1)),
			   fmaxf(get<T, VEC>(p, 2), get<T, VEC>(p, 3)));
	} else {
#pragma unroll
		for (int u = 0; u < UNROLL; u++)
			if (FULL || base + (int64_t)u * GROUP < nv)
#pragma unroll
				for (int j = 0; j < VEC; j++)
					cm = fmaxf(cm, get<T, VEC>(f[u], j));
	}
	const float mn = fmaxf(m, cm);
	s *= ex2((m - mn) * L2E);
#pragma unroll
	for (int u = 0; u < UNROLL; u++)
		if (FULL || base + (int64_t)u * GROUP < nv)
#pragma unroll
			for (int j = 0; j < VEC; j++)
				s += ex2((get<T, VEC>(f[u], j) - mn) * L2E);
	m = mn;
}

/* Blocks that have finished; the last one resets it for the next call. */
static __device__ unsigned int blocks_done = 0;

template <typename T, int VEC>
__global__ void __launch_bounds__(BLOCK)
ce_loss(const T *__restrict__ x, const int64_t *__restrict__ target,
	float *__restrict__ rows, float *__restrict__ out, int64_t N, int64_t V)
{
	const int64_t row = (int64_t)blockIdx.x * (BLOCK / GROUP) + threadIdx.x / GROUP;
	const int t = threadIdx.x % GROUP;
	const bool live = row < N;
	const int64_t nv = live ? V / VEC : 0;
	const T *xr = x + (live ? row : 0) * V;
	float m = -INFINITY, s = 0.f, xt = 0.f;

	/* The target logit, early: its latency hides under the stream. */
	if (live && t == 0) {
		const int64_t k = target[row];
		xt = (k >= 0 && k < V) ? to_f32(xr[k]) : NAN;
	}
	int64_t base = t;
	for (; base + (int64_t)(UNROLL - 1) * GROUP < nv; base += (int64_t)GROUP * UNROLL)
		trip<T, VEC, true>(xr, base, nv, m, s);
	if (base < nv)
		trip<T, VEC, false>(xr, base, nv, m, s);
	group_lse(m, s);
	if (live && t == 0) {
		rows[row] = logf(s) + m - xt;
		__threadfence();        /* visible before this block's ticket */
	}

	/* Last block to finish: mean of the row losses, in index order. */
	__shared__ bool last;
	__syncthreads();
	if (threadIdx.x == 0)
		last = atomicAdd(&blocks_done, 1u) == gridDim.x - 1;
	__syncthreads();
	if (!last)
		return;
	__threadfence();
	float a = 0.f;
	for (int64_t i = threadIdx.x; i < N; i += BLOCK)
		a += __ldcg(rows + i);
#pragma unroll
	for (int o = 16; o > 0; o /= 2)
		a += __shfl_xor_sync(0xffffffffu, a, o);
	__shared__ float red[BLOCK / 32];
	if (threadIdx.x % 32 == 0)
		red[threadIdx.x / 32] = a;
	__syncthreads();
	if (threadIdx.x == 0) {
		a = 0.f;
		for (int w = 0; w < BLOCK / 32; w++)
			a += red[w];
		out[0] = a / (float)N;
		blocks_done = 0;
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
	cudaStream_t st = (cudaStream_t)a->stream;
	constexpr int VW = 16 / sizeof(T);
	int64_t grid = (N + BLOCK / GROUP - 1) / (BLOCK / GROUP);

	if (a->in[1].dtype != AK_I64 || a->out[0].dtype != AK_F32)
		return -1;
	if (N > 0 && (!rows || a->workspace_size < (size_t)N * sizeof(float)))
		return -1;
	if (grid < 1)
		grid = 1;       /* N == 0: one block writes the (NaN) mean */
	if (grid >= ((int64_t)1 << 31))
		return -1;
	if (V % VW == 0 && aligned16(x))
		ce_loss<T, VW><<<grid, BLOCK, 0, st>>>(x, target, rows, out, N, V);
	else
		ce_loss<T, 1><<<grid, BLOCK, 0, st>>>(x, target, rows, out, N, V);
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
