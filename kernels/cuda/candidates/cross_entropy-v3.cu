/*
 * cross_entropy: loss = mean over n of logsumexp(logits[n,:]) -
 * logits[n,target[n]], f32 math, f32 scalar output.
 *
 * Why it is fast: it is one read of the logits (262 MB at 4096 x 32000
 * f16), and one exp per logit keeps the special-function units about half
 * busy, so loads and math must overlap on every multiprocessor.  v2 did
 * not: a 512-thread block read its whole row in one trip, then all its
 * warps did the math together and met at a barrier, with nothing in
 * flight meanwhile.  Here, with many rows, ONE WARP streams one row
 * (G = 32; 4096 warps, all resident in one wave at 64 registers) and
 * never waits for another warp until its row is done; the stream is
 * double-buffered in registers: the next UNROLL 16-byte loads of a lane
 * are issued before the math on the current ones, so every warp always
 * has loads in flight.  Per trip: the max on packed halves (exact), one
 * rescale of the running sum, one FFMA + ex2 per logit (2^(x*log2e - m*log2e)).
 * With few rows a row gets more threads (G up to 1024, merged through
 * shared memory once at the end) so the machine still fills.
 *
 * Any V takes the 16-byte path: a row is split into a head up to the
 * first 16-byte boundary, an aligned body and a tail, the head and tail
 * (under 16 bytes each) read one element per thread.  The target logit is
 * fetched first, its latency hidden under the stream.  Each row's loss
 * goes to the workspace; the last block to finish (an integer ticket in a
 * module variable that the last block resets to zero) sums them in a
 * fixed order and divides by N: one launch, no float atomics, bitwise
 * deterministic.
 */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>
#include <type_traits>
#include "autokernel.h"

#define BLOCK 128   /* autokernel: tune 64,128,256,512 */
#define UNROLL 4    /* autokernel: tune 2,4 */
#define FILL 24     /* autokernel: tune 8,16,24,32 */

/* Threads per multiprocessor the launch bounds are written for: 64 regs. */
#define SM_THREADS 1024

#define L2E 1.4426950408889634f

static __device__ __forceinline__ float to_f32(float x) { return x; }
static __device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }
static __device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }

/*
 * 16 bytes at p when ok, else zeros: one predicated load, no branch, so
 * a lane's loads go out back to back.  Logits are read once: no L1.
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

template <typename T>
static __device__ __forceinline__ float elem(const uint4 &u, int j)
{
	return to_f32(reinterpret_cast<const T *>(&u)[j]);
}

/* Elementwise max of two words of 8 halves (f16 or bf16): exact. */
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

/* UNROLL packs of the body, G apart, from pack base on (those < nb). */
template <int G>
static __device__ __forceinline__ void load_trip(uint4 (&f)[UNROLL], const uint4 *body,
						 int64_t base, int64_t nb)
{
#pragma unroll
	for (int u = 0; u < UNROLL; u++) {
		const int64_t i = base + (int64_t)u * G;
		f[u] = ld_stream(body + i, i < nb);
	}
}

/*
 * Folds one trip (packs base + u*G < nb; base < nb) into the running
 * (m, s), s = sum of 2^((x - m) * log2e): the trip's max, one rescale,
 * then one FFMA and one ex2 per logit.
 */
template <typename T, int G>
static __device__ __forceinline__ void consume(const uint4 (&f)[UNROLL], int64_t base,
					       int64_t nb, float &m, float &s)
{
	constexpr int VEC = 16 / sizeof(T);
	float cm = -INFINITY;

	if constexpr (sizeof(T) == 2) {
		uint4 mx = f[0];
#pragma unroll
		for (int u = 1; u < UNROLL; u++)
			if (base + (int64_t)u * G < nb)
				mx = max8<T>(mx, f[u]);
		mx = max8<T>(mx, make_uint4(mx.z, mx.w, mx.x, mx.y));
		cm = fmaxf(fmaxf(elem<T>(mx, 0), elem<T>(mx, 1)),
			   fmaxf(elem<T>(mx, 2), elem<T>(mx, 3)));
	} else {
#pragma unroll
		for (int u = 0; u < UNROLL; u++)
			if (base + (int64_t)u * G < nb)
#pragma unroll
				for (int j = 0; j < VEC; j++)
					cm = fmaxf(cm, elem<T>(f[u], j));
	}
	if (cm == -INFINITY)
		return;         /* all -inf: adds nothing (and no inf - inf) */
	const float mn = fmaxf(m, cm), c = mn * L2E;
	float s0 = s * ex2((m - mn) * L2E), s1 = 0.f;
#pragma unroll
	for (int u = 0; u < UNROLL; u++)
		if (base + (int64_t)u * G < nb)
#pragma unroll
			for (int j = 0; j < VEC; j += 2) {
				s0 += ex2(fmaf(elem<T>(f[u], j), L2E, -c));
				s1 += ex2(fmaf(elem<T>(f[u], j + 1), L2E, -c));
			}
	s = s0 + s1;
	m = mn;
}

/*
 * Merges (m, s) with (mb, sb).  Products rounded separately (no
 * contraction), so both lanes of a butterfly get the same bits.
 */
static __device__ __forceinline__ void lse_merge(float &m, float &s, float mb, float sb)
{
	const float mm = fmaxf(m, mb);

	if (mm == -INFINITY)
		return;
	s = __fmul_rn(s, ex2((m - mm) * L2E)) + __fmul_rn(sb, ex2((mb - mm) * L2E));
	m = mm;
}

/* Threads a block of the G-wide kernel may have (the launch bound). */
template <int G> struct tb { static constexpr int n = G > BLOCK ? G : BLOCK; };

/* Blocks that have finished; the last one resets it for the next call. */
static __device__ unsigned int blocks_done = 0;

/* G threads a row, blockDim.x / G rows a block. */
template <typename T, int G>
__global__ void __launch_bounds__(tb<G>::n, SM_THREADS / tb<G>::n)
ce_loss(const T *__restrict__ x, const int64_t *__restrict__ target,
	float *__restrict__ rows, float *__restrict__ out, int64_t N, int64_t V)
{
	constexpr int VEC = 16 / sizeof(T);
	constexpr int NW = tb<G>::n / 32;
	__shared__ float fin[NW];
	__shared__ bool last;
	const int64_t row = (int64_t)blockIdx.x * (blockDim.x / G) + threadIdx.x / G;
	const int t = threadIdx.x % G;
	const bool live = row < N;
	const T *xr = x + (live ? row : 0) * V;
	float m = -INFINITY, s = 0.f, xt = 0.f;

	/* The target logit, early: its latency hides under the stream. */
	if (live && t == 0) {
		const int64_t k = target[row];
		xt = (k >= 0 && k < V) ? to_f32(xr[k]) : NAN;
	}

	/* Head (to the first 16-byte boundary), aligned body, tail. */
	const int mis = (int)(((uintptr_t)xr & 15) / sizeof(T));
	const int64_t h = mis ? (VEC - mis < V ? VEC - mis : V) : 0;
	const int64_t nb = live ? (V - h) / VEC : 0;
	const int64_t rem = V - h - nb * VEC;
	const uint4 *body = reinterpret_cast<const uint4 *>(xr + h);
	{
		const float e0 = live && t < h ? to_f32(xr[t]) : -INFINITY;
		const float e1 = live && t < rem ? to_f32(xr[h + nb * VEC + t]) : -INFINITY;
		m = fmaxf(e0, e1);
		if (m != -INFINITY)
			s = ex2((e0 - m) * L2E) + ex2((e1 - m) * L2E);
	}

	/* The body, double-buffered: trip k+1's loads fly during trip k. */
	constexpr int64_t S = (int64_t)G * UNROLL;
	uint4 a[UNROLL], b[UNROLL];
	int64_t base = t;
	load_trip<G>(a, body, base, nb);
	while (base < nb) {
		load_trip<G>(b, body, base + S, nb);
		consume<T, G>(a, base, nb, m, s);
		base += S;
		if (base >= nb)
			break;
		load_trip<G>(a, body, base + S, nb);
		consume<T, G>(b, base, nb, m, s);
		base += S;
	}

	/* Merge over the group: a butterfly, then the group's warps in order. */
#pragma unroll
	for (int o = 16; o > 0; o /= 2) {
		const float mb = __shfl_xor_sync(0xffffffffu, m, o);
		const float sb = __shfl_xor_sync(0xffffffffu, s, o);
		lse_merge(m, s, mb, sb);
	}
	if constexpr (G > 32) {
		constexpr int GW = G / 32;
		__shared__ float red[2][NW];
		const int warp = threadIdx.x / 32, first = warp / GW * GW;

		if (threadIdx.x % 32 == 0) {
			red[0][warp] = m;
			red[1][warp] = s;
		}
		__syncthreads();
		m = red[0][first];
		s = red[1][first];
#pragma unroll
		for (int i = 1; i < GW; i++)
			lse_merge(m, s, red[0][first + i], red[1][first + i]);
	}
	if (live && t == 0) {
		rows[row] = logf(s) + m - xt;
		__threadfence();        /* visible before this block's ticket */
	}

	/* Last block to finish: mean of the row losses, in index order. */
	__syncthreads();
	if (threadIdx.x == 0)
		last = atomicAdd(&blocks_done, 1u) == gridDim.x - 1;
	__syncthreads();
	if (!last)
		return;
	__threadfence();
	float acc = 0.f;
#pragma unroll 4
	for (int64_t i = threadIdx.x; i < N; i += blockDim.x)
		acc += __ldcg(rows + i);
#pragma unroll
	for (int o = 16; o > 0; o /= 2)
		acc += __shfl_xor_sync(0xffffffffu, acc, o);
	if (threadIdx.x % 32 == 0)
		fin[threadIdx.x / 32] = acc;
	__syncthreads();
	if (threadIdx.x == 0) {
		acc = 0.f;
		for (int w = 0; w < (int)(blockDim.x / 32); w++)
			acc += fin[w];
		out[0] = acc / (float)N;
		blocks_done = 0;
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
 * G: 32, doubled while the rows give fewer than FILL warps a
 * multiprocessor and a row still needs more than one trip of G threads.
 */
template <typename T, int G>
static void launch(const T *x, const int64_t *target, float *rows, float *out,
		   int64_t N, int64_t V, cudaStream_t st)
{
	constexpr int VEC = 16 / sizeof(T);

	if constexpr (G < 1024) {
		if (N * (G / 32) < (int64_t)FILL * sm_count() &&
		    (int64_t)G * UNROLL < V / VEC) {
			launch<T, G * 2>(x, target, rows, out, N, V, st);
			return;
		}
	}
	int per = tb<G>::n / G;
	/* Rows per block: halved while that leaves under 4 blocks an SM. */
	while (per > 1 && (N + per - 1) / per < 4 * (int64_t)sm_count())
		per /= 2;
	int64_t grid = (N + per - 1) / per;
	if (grid < 1)
		grid = 1;       /* N == 0: one block writes the (NaN) mean */
	ce_loss<T, G><<<grid, per * G, 0, st>>>(x, target, rows, out, N, V);
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
	const T *x = (const T *)xt->data;

	if (a->in[1].dtype != AK_I64 || a->out[0].dtype != AK_F32)
		return -1;
	if (N > 0 && (!a->workspace || a->workspace_size < (size_t)N * sizeof(float)))
		return -1;
	if (N >= ((int64_t)1 << 31) || ((uintptr_t)x % sizeof(T)) != 0)
		return -1;
	launch<T, 32>(x, (const int64_t *)a->in[1].data, (float *)a->workspace,
		      (float *)a->out[0].data, N, V, (cudaStream_t)a->stream);
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
