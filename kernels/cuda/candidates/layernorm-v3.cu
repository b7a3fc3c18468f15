/*
 * layernorm: y = (x - mean) / sqrt(var + eps) * w + b per row, biased
 * variance, f32 math.
 *
 * Why it is fast: at 4096 x 2048 the whole problem (33.5 MB) moves in
 * about 13 us, one wave of latency, so every multiprocessor must have all
 * its loads in flight from the first cycle.  A group of G threads owns a
 * row and holds it in registers, ITEMS 16-byte packs per thread, all
 * issued back to back before the first use (predicated, no branches): at
 * the bench shape G = 32, one warp per row, 8 x 16 B per lane, 4096 warps
 * that are all resident at once (the kernel is compiled for 64 registers
 * at 1024 threads per multiprocessor, 31 warps each), with no barrier at
 * all (warp shuffles only).  While x is in flight each warp prefetches its
 * lines of w and b into L1 (x loads skip L1), so the output pass reads
 * them at L1 latency without holding them in registers.  Mean, then the
 * sum of squared deviations from that mean (two-pass, from registers: no
 * cancellation), both bitwise deterministic; y is written once, 16 bytes
 * per access.  Wider rows take G = 64 .. 1024 threads and one fixed-order
 * pass over the group's warps through shared memory; with few rows the
 * group takes at most 4 packs a thread (more threads a row).
 *
 * Rows that are not a multiple of 16 bytes (or misaligned pointers) take
 * the same kernel one element per access; rows too long for registers
 * (more than 1024 x 8 packs) take a streaming kernel that reads x three
 * times (mean, squared deviations, output).
 */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>
#include "autokernel.h"

#define BLOCK 256    /* autokernel: tune 64,128,256,512 */
#define FILL 4       /* autokernel: tune 1,2,4 */
#define PREFETCH 1   /* autokernel: tune 0,1 */

/* Threads per multiprocessor the launch bounds are written for: 64 regs. */
#define SM_THREADS 1024
#define LONG_G 1024  /* threads a row in the streaming kernel */

static __device__ __forceinline__ float to_f32(float x) { return x; }
static __device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }
static __device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> static __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_f32<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

/*
 * 16 bytes at p when ok, else zeros: one predicated load, no branch.
 * STREAM: read once, skip L1 (which then keeps w and b).
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

static __device__ __forceinline__ void prefetch_l1(const void *p)
{
	asm volatile("prefetch.global.L1 [%0];" :: "l"(p));
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

/*
 * r, opaque to the compiler: each pass converts the packed row again
 * instead of keeping 64 floats alive across the reductions (bf16's shift
 * conversion would otherwise be reused, and spill).
 */
template <typename T, int VEC>
static __device__ __forceinline__ pack<T, VEC> fresh(pack<T, VEC> r)
{
	if constexpr (VEC > 1)
		asm volatile("" : "+r"(r.u.x), "+r"(r.u.y), "+r"(r.u.z), "+r"(r.u.w));
	return r;
}

template <typename T, int VEC>
static __device__ __forceinline__ void st(T *p, const float *f)
{
	if constexpr (VEC == 1) {
		p[0] = from_f32<T>(f[0]);
	} else {
		uint4 u;
		T *e = reinterpret_cast<T *>(&u);
#pragma unroll
		for (int j = 0; j < VEC; j++)
			e[j] = from_f32<T>(f[j]);
		*reinterpret_cast<uint4 *>(p) = u;
	}
}

/* Threads a block of the G-wide kernel may have (the launch bound). */
template <int G> struct tb { static constexpr int n = G > BLOCK ? G : BLOCK; };

/*
 * Sum over the G consecutive threads of a row, in a fixed order; every
 * thread of the group gets the same bits.  red: tb<G>::n / 32 floats, a
 * different array for each call (no barrier needed before the write).
 */
template <int G>
static __device__ __forceinline__ float group_sum(float v, float *red)
{
#pragma unroll
	for (int o = 16; o > 0; o /= 2)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	if constexpr (G > 32) {
		constexpr int NW = G / 32;
		const int warp = threadIdx.x / 32, first = warp / NW * NW;

		if (threadIdx.x % 32 == 0)
			red[warp] = v;
		__syncthreads();
		v = red[first];
#pragma unroll
		for (int i = 1; i < NW; i++)
			v += red[first + i];
	}
	return v;
}

struct ln_args {
	const void *x, *w, *b;
	void *y;
	int64_t R, C;
	float eps;
};

/* Row in registers: G threads a row, ITEMS packs of VEC elements each. */
template <typename T, int VEC, int G, int ITEMS>
__global__ void __launch_bounds__(tb<G>::n, SM_THREADS / tb<G>::n)
layernorm_regs(struct ln_args p)
{
	__shared__ float red[2][tb<G>::n / 32];
	const T *__restrict__ x = (const T *)p.x;
	const T *__restrict__ w = (const T *)p.w;
	const T *__restrict__ b = (const T *)p.b;
	T *__restrict__ y = (T *)p.y;
	const int64_t row = (int64_t)blockIdx.x * (blockDim.x / G) + threadIdx.x / G;
	const int t = threadIdx.x % G;
	const bool live = row < p.R;
	const int nv = (int)(p.C / VEC);        /* <= G * ITEMS */
	const T *xr = x + (live ? row : 0) * p.C;
	pack<T, VEC> v[ITEMS];

#pragma unroll
	for (int k = 0; k < ITEMS; k++) {
		const int i = k * G + t;
		v[k] = ld<T, VEC, true>(xr + (int64_t)i * VEC, live && i < nv);
	}
	if (PREFETCH && VEC > 1) {
		/* One prefetch per 128-byte line of w and b this thread reads. */
		constexpr int LINE = 128 / 16;
#pragma unroll
		for (int k = 0; k < ITEMS; k++) {
			const int i = k * G + t;
			if (i < nv && i % LINE == 0) {
				prefetch_l1(w + (int64_t)i * VEC);
				prefetch_l1(b + (int64_t)i * VEC);
			}
		}
	}

	/* Mean: independent partial sums per pack, then a fixed order. */
	float s = 0.f;
#pragma unroll
	for (int k = 0; k < ITEMS; k++) {
		float a = 0.f;
#pragma unroll
		for (int j = 0; j < VEC; j++)
			a += get<T, VEC>(v[k], j);
		s += a;
	}
	const float mean = group_sum<G>(s, red[0]) / (float)p.C;

	/* Squared deviations from the mean, real elements only. */
	float q = 0.f;
#pragma unroll
	for (int k = 0; k < ITEMS; k++) {
		const pack<T, VEC> u = fresh<T, VEC>(v[k]);
		float a = 0.f;
#pragma unroll
		for (int j = 0; j < VEC; j++) {
			const float e = get<T, VEC>(u, j) - mean;
			a = fmaf(e, e, a);
		}
		q += k * G + t < nv ? a : 0.f;
	}
	const float var = group_sum<G>(q, red[1]) / (float)p.C;
	const float rstd = 1.f / sqrtf(var + p.eps);

	if (!live)
		return;
	T *yr = y + row * p.C;
#pragma unroll
	for (int k = 0; k < ITEMS; k++) {
		const int i = k * G + t;
		float f[VEC];

		if (i >= nv)
			continue;
		const pack<T, VEC> wv = ld<T, VEC, false>(w + (int64_t)i * VEC, true);
		const pack<T, VEC> bv = ld<T, VEC, false>(b + (int64_t)i * VEC, true);
		const pack<T, VEC> u = fresh<T, VEC>(v[k]);
#pragma unroll
		for (int j = 0; j < VEC; j++)
			f[j] = fmaf((get<T, VEC>(u, j) - mean) * rstd,
				    get<T, VEC>(wv, j), get<T, VEC>(bv, j));
		st<T, VEC>(yr + (int64_t)i * VEC, f);
	}
}

/*
 * Rows too long for registers, one block of LONG_G threads a row: a mean
 * pass, a pass for the squared deviations from that mean, the output pass.
 */
template <typename T, int VEC>
__global__ void __launch_bounds__(LONG_G) layernorm_long(struct ln_args p)
{
	__shared__ float red[2][LONG_G / 32];
	const T *__restrict__ x = (const T *)p.x;
	const T *__restrict__ w = (const T *)p.w;
	const T *__restrict__ b = (const T *)p.b;
	T *__restrict__ y = (T *)p.y;
	const int64_t row = blockIdx.x, nv = p.C / VEC, off = row * p.C;
	const int t = threadIdx.x;
	float s = 0.f, q = 0.f;

	for (int64_t i = t; i < nv; i += LONG_G) {
		const pack<T, VEC> u = ld<T, VEC, true>(x + off + i * VEC, true);
#pragma unroll
		for (int j = 0; j < VEC; j++)
			s += get<T, VEC>(u, j);
	}
	const float mean = group_sum<LONG_G>(s, red[0]) / (float)p.C;
	for (int64_t i = t; i < nv; i += LONG_G) {
		const pack<T, VEC> u = ld<T, VEC, false>(x + off + i * VEC, true);
#pragma unroll
		for (int j = 0; j < VEC; j++) {
			const float e = get<T, VEC>(u, j) - mean;
			q = fmaf(e, e, q);
		}
	}
	const float var = group_sum<LONG_G>(q, red[1]) / (float)p.C;
	const float rstd = 1.f / sqrtf(var + p.eps);
	for (int64_t i = t; i < nv; i += LONG_G) {
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

/* Rows per block: BLOCK / G, halved while that leaves too few blocks. */
static int64_t launch_grid(int64_t R, int G, int *threads)
{
	int rows = (G > BLOCK ? G : BLOCK) / G;

	while (rows > 1 && (R + rows - 1) / rows < (int64_t)FILL * sm_count())
		rows /= 2;
	*threads = rows * G;
	return (R + rows - 1) / rows;
}

template <typename T, int VEC, int G, int ITEMS>
static void launch_one(cudaStream_t st, const struct ln_args &p)
{
	int threads;
	const int64_t grid = launch_grid(p.R, G, &threads);

	layernorm_regs<T, VEC, G, ITEMS><<<grid, threads, 0, st>>>(p);
}

/*
 * One warp a row with the fewest packs a thread that hold it (1 .. MAXI),
 * else the smallest G whose MAXI packs a thread hold it.  Returns false
 * when the row is too long for registers.
 */
template <typename T, int VEC, int MAXI, int G>
static bool launch_regs(int64_t nv, cudaStream_t st, const struct ln_args &p)
{
	if constexpr (G == 32) {
		if (nv <= 32 * 1 && MAXI >= 1)
			return launch_one<T, VEC, 32, 1>(st, p), true;
		if (nv <= 32 * 2 && MAXI >= 2)
			return launch_one<T, VEC, 32, 2>(st, p), true;
		if (nv <= 32 * 4 && MAXI >= 4)
			return launch_one<T, VEC, 32, 4>(st, p), true;
		if (nv <= 32 * 8 && MAXI >= 8)
			return launch_one<T, VEC, 32, 8>(st, p), true;
		return launch_regs<T, VEC, MAXI, 64>(nv, st, p);
	} else if constexpr (G <= 1024) {
		if (nv <= (int64_t)G * MAXI)
			return launch_one<T, VEC, G, MAXI>(st, p), true;
		return launch_regs<T, VEC, MAXI, G * 2>(nv, st, p);
	}
	return false;
}

template <typename T, int VEC>
static void launch(cudaStream_t st, const struct ln_args &p)
{
	const int64_t nv = p.C / VEC;
	/* Few rows: at most 4 packs a thread, twice the threads a row. */
	const bool few = p.R < (int64_t)FILL * sm_count();

	if (few ? launch_regs<T, VEC, 4, 32>(nv, st, p) :
		  launch_regs<T, VEC, 8, 32>(nv, st, p))
		return;
	if (launch_regs<T, VEC, 8, 32>(nv, st, p))
		return;
	layernorm_long<T, VEC><<<p.R, LONG_G, 0, st>>>(p);
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
	if (p.R >= ((int64_t)1 << 31))
		return -1;

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
