/*
 * softmax: y[r,:] = exp(x[r,:] - max) / sum(exp(x[r,:] - max)), f32 math.
 *
 * A group of GROUP threads owns one row; a block holds BLOCK/GROUP rows.
 * When the row fits (at most 64 floats per thread) it stays in registers,
 * so HBM is read once and written once, with 16-byte loads and stores when
 * the row length and the pointers allow it.  Max and sum are butterfly warp
 * shuffles, then a fixed-order pass over the group's warps in shared memory:
 * no atomics, so the output is bitwise deterministic.  Longer rows take a
 * streaming kernel (online max and sum, then a second read to normalize);
 * so do rows that are not 16-byte aligned (rare), which halves the number
 * of kernels and the build time.
 *
 * Few long rows (32x50257, 1x32000: a block a row leaves most of the
 * device idle) are split into chunks: each block of a row finds its
 * chunk's max and sum into the workspace, then each block combines its
 * row's partials (every block in the same fixed order, so all agree
 * bitwise) and writes its chunk, whose x the first pass left in L2.
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
	__shared__ float red[BLOCK / 32];
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

/* One vector of the online max and sum: the running max m and the sum s
 * of exp(x - m) over what came before, updated by f[0..VEC). */
template <int VEC>
static __device__ __forceinline__ void online_step(const float (&f)[VEC],
						   float &m, float &s)
{
	float mn = m;
#pragma unroll
	for (int j = 0; j < VEC; j++)
		mn = fmaxf(mn, f[j]);
	/* all -inf so far (a masked prefix) adds 0, not exp(-inf - -inf) */
	const float base = mn == -INFINITY ? 0.f : mn;
	s *= rescale(m, mn);
#pragma unroll
	for (int j = 0; j < VEC; j++)
		s += expf(f[j] - base);
	m = mn;
}

/* Rows too long for registers: online max/sum pass, then normalize pass. */
template <typename T, int VEC>
__global__ void __launch_bounds__(BLOCK)
softmax_long(const T *__restrict__ x, T *__restrict__ y, int64_t R, int64_t C)
{
	__shared__ float red[BLOCK / 32];
	const int64_t row = (int64_t)blockIdx.x * (BLOCK / GROUP) + threadIdx.x / GROUP;
	const int t = threadIdx.x % GROUP;
	const bool live = row < R;
	const int64_t nv = live ? C / VEC : 0, off = (live ? row : 0) * C;
	float m = -INFINITY, s = 0.f, f[VEC];

	for (int64_t i = t; i < nv; i += GROUP) {
		load_vec<T, VEC>(x + off + i * VEC, f);
		online_step<VEC>(f, m, s);
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
static bool launch_regs(int64_t per, int64_t grid, cudaStream_t st,
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
static void launch(int64_t grid, cudaStream_t st, const T *x, T *y,
		   int64_t R, int64_t C)
{
	const int64_t per = (C / VEC + GROUP - 1) / GROUP;

	/* Unaligned rows (VEC 1) are rare: they stream, which keeps the
	 * number of kernels, and the build time, small. */
	if constexpr (VEC > 1)
		if (launch_regs<T, VEC, 1>(per, grid, st, x, y, R, C))
			return;
	softmax_long<T, VEC><<<grid, BLOCK, 0, st>>>(x, y, R, C);
}

static bool aligned16(const void *p)
{
	return ((uintptr_t)p & 15) == 0;
}

/* ---- few long rows: chunks ---- */

#define SPLIT_MIN 8192          /* elements a row needs to be split */
#define CHUNK_MIN 2048          /* elements a chunk holds at least */

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

/* Chunks a row is split into: 1 when the rows fill the device already. */
static int64_t chunks(int64_t R, int64_t C)
{
	const int64_t want = 2 * (int64_t)sm_count();
	int64_t s;

	if (C < SPLIT_MIN || R >= want)
		return 1;
	s = (want + R - 1) / R;
	if (s > C / CHUNK_MIN)
		s = C / CHUNK_MIN;
	return s > 1 ? s : 1;
}

/* v reduced over the whole block, the same bits in every thread. */
template <class Op>
static __device__ __forceinline__ float block_reduce(float v, float *red, Op op)
{
#pragma unroll
	for (int o = 16; o > 0; o /= 2)
		v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
	__syncthreads();
	if (threadIdx.x % 32 == 0)
		red[threadIdx.x / 32] = v;
	__syncthreads();
	v = red[0];
#pragma unroll
	for (int i = 1; i < BLOCK / 32; i++)
		v = op(v, red[i]);
	return v;
}

/* Block (s, r): the max and the sum of exp(x - max) of chunk s of row r,
 * into part[2 * (r * S + s)]. */
template <typename T, int VEC>
__global__ void __launch_bounds__(BLOCK)
softmax_chunk_stats(const T *__restrict__ x, float *__restrict__ part,
		    int64_t C, int64_t per)
{
	__shared__ float red[BLOCK / 32];
	const int64_t r = blockIdx.y, c = blockIdx.x, S = gridDim.x;
	const int64_t nv = C / VEC, lo = c * per;
	const int64_t hi = lo + per < nv ? lo + per : nv;
	const T *xr = x + r * C;
	float m = -INFINITY, sum = 0.f, f[VEC];

	for (int64_t i = lo + threadIdx.x; i < hi; i += BLOCK) {
		load_vec<T, VEC>(xr + i * VEC, f);
		online_step<VEC>(f, m, sum);
	}
	const float mx = block_reduce(m, red, op_max());
	sum = block_reduce(sum * rescale(m, mx), red, op_sum());
	if (threadIdx.x == 0) {
		part[2 * (r * S + c)] = mx;
		part[2 * (r * S + c) + 1] = sum;
	}
}

/* Block (s, r): row r's max and sum from its partials, then chunk s. */
template <typename T, int VEC>
__global__ void __launch_bounds__(BLOCK)
softmax_chunk_write(const T *__restrict__ x, T *__restrict__ y,
		    const float *__restrict__ part, int64_t C, int64_t per)
{
	__shared__ float red[BLOCK / 32];
	const int64_t r = blockIdx.y, c = blockIdx.x, S = gridDim.x;
	const int64_t nv = C / VEC, lo = c * per;
	const int64_t hi = lo + per < nv ? lo + per : nv;
	const float *pr = part + 2 * r * S;
	float m = -INFINITY, sum = 0.f, f[VEC];

	for (int64_t k = threadIdx.x; k < S; k += BLOCK)
		m = fmaxf(m, pr[2 * k]);
	const float mx = block_reduce(m, red, op_max());
	for (int64_t k = threadIdx.x; k < S; k += BLOCK)
		sum += pr[2 * k + 1] * rescale(pr[2 * k], mx);
	const float inv = 1.f / block_reduce(sum, red, op_sum());

	for (int64_t i = lo + threadIdx.x; i < hi; i += BLOCK) {
		load_vec<T, VEC>(x + r * C + i * VEC, f);
#pragma unroll
		for (int j = 0; j < VEC; j++)
			f[j] = expf(f[j] - mx) * inv;
		store_vec<T, VEC>(y + r * C + i * VEC, f);
	}
}

template <typename T, int VEC>
static void launch_split(const T *x, T *y, float *part, int64_t R, int64_t C,
			 int64_t S, cudaStream_t st)
{
	const int64_t per = (C / VEC + S - 1) / S;
	const dim3 grid((unsigned)S, (unsigned)R);

	softmax_chunk_stats<T, VEC><<<grid, BLOCK, 0, st>>>(x, part, C, per);
	softmax_chunk_write<T, VEC><<<grid, BLOCK, 0, st>>>(x, y, part, C, per);
}

static int64_t row_len(const struct ak_args *a)
{
	const struct ak_tensor *xt = &a->in[0];

	return xt->ndim ? xt->shape[xt->ndim - 1] : 1;
}

extern "C" size_t ak_workspace_size(const struct ak_args *a)
{
	const int64_t C = row_len(a), R = C ? ak_numel(&a->in[0]) / C : 0;
	const int64_t S = chunks(R, C);

	return S > 1 ? (size_t)(2 * R * S) * sizeof(float) : 0;
}

template <typename T>
static int run(const struct ak_args *a)
{
	const struct ak_tensor *xt = &a->in[0];
	const int64_t C = row_len(a);
	const int64_t R = C ? ak_numel(xt) / C : 0;
	const T *x = (const T *)xt->data;
	T *y = (T *)a->out[0].data;
	cudaStream_t st = (cudaStream_t)a->stream;
	constexpr int V = 16 / sizeof(T);
	const int64_t grid = (R + BLOCK / GROUP - 1) / (BLOCK / GROUP);

	if (R == 0)
		return 0;
	const int64_t S = chunks(R, C);
	if (S > 1 && a->workspace &&
	    a->workspace_size >= (size_t)(2 * R * S) * sizeof(float)) {
		float *part = (float *)a->workspace;

		if (C % V == 0 && aligned16(x) && aligned16(y))
			launch_split<T, V>(x, y, part, R, C, S, st);
		else
			launch_split<T, 1>(x, y, part, R, C, S, st);
	} else if (C % V == 0 && aligned16(x) && aligned16(y))
		launch<T, V>(grid, st, x, y, R, C);
	else
		launch<T, 1>(grid, st, x, y, R, C);
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
