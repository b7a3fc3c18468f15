/*
 * layernorm: y = (x - mean) / sqrt(var + eps) * w + b per row, biased
 * variance, f32 math.
 *
 * A group of G threads owns one row; a block holds max(BLOCK, G) / G rows.
 * G is GROUP when there are rows enough to fill the device (FEW_ROWS or
 * more), else FEW_GROUP, so that a few long rows still spread over many
 * threads.  When the row fits (at most 64 floats per thread) it stays in
 * registers, and the thread's slices of w and b are loaded with it, before
 * the reductions, so their latency hides under the row's (up to 32 floats
 * a thread; past that they would spill, and load after the reductions):
 * x is read from HBM once, the mean and then the variance of (x - mean)
 * are taken from registers (two-pass, so no cancellation), and y is written
 * once, with 16-byte accesses when the row length and pointers allow it.
 * Reductions are warp shuffles plus a fixed-order pass over the group's
 * warps: bitwise deterministic.  Longer rows, and rows that are not 16-byte
 * aligned (rare), take a streaming kernel that reads x three times; that
 * keeps the number of kernels, and the build time, small.  With PERSIST,
 * rows whose w and b load early and that take more than one wave of
 * blocks run persistent: w and b once per thread, and the next row's x in
 * flight while this row reduces.
 */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>
#include <type_traits>
#include "autokernel.h"

#define BLOCK 256  /* autokernel: tune 128,256,512,1024 */
#define GROUP 128  /* autokernel: tune 32,64,128,256,512,1024 if GROUP <= BLOCK */
#define FEW_GROUP 512   /* autokernel: tune 256,512,1024 */
#define FEW_ROWS 1024   /* autokernel: tune 512,1024,2048 */
#define WIDE_GROUP 256  /* autokernel: tune 128,256,512 */
#define PERSIST 1       /* autokernel: tune 0,1 */
#define PER_SM 0        /* autokernel: tune 0,2,4,8 */

#define MAX_FLOATS 64   /* row floats a thread may hold in registers */

static __device__ __forceinline__ float to_f32(float x) { return x; }
static __device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }
static __device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> static __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_f32<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

/* Element j of a 16-byte vector of T.  With WORDS a bf16, the top half
 * of its float, is taken from its 32-bit word by a shift or a mask: as
 * cvt.f32.bf16 of a 16-bit half, ptxas first moves each half out of the
 * word, and 16384x4096 in bf16 took 64 registers and spilled where f16
 * took 52.  Only layernorm_regs asks for it: on an H100 the words made
 * 16384x4096 4% faster there and the narrow rows of layernorm_pipe 2-3%
 * slower.  Kept by the hook on an H100 (session 22, bf16): 16384x4096
 * 101.25 -> 97.31 us, 8192x768 and 4096x2048 even. */
template <typename T, bool WORDS = false>
static __device__ __forceinline__ float elem(const uint4 &u, int j)
{
	if constexpr (WORDS && std::is_same_v<T, __nv_bfloat16>) {
		const uint32_t w = reinterpret_cast<const uint32_t *>(&u)[j / 2];
		return __uint_as_float(j % 2 ? w & 0xffff0000u : w << 16);
	} else {
		return to_f32(reinterpret_cast<const T *>(&u)[j]);
	}
}

/* VEC elements at p into f; one 16-byte access when VEC fills 16 bytes. */
template <typename T, int VEC, bool WORDS = false>
static __device__ __forceinline__ void load_vec(const T *p, float *f)
{
	if constexpr (VEC * sizeof(T) == 16) {
		uint4 u = __ldg(reinterpret_cast<const uint4 *>(p));
#pragma unroll
		for (int j = 0; j < VEC; j++)
			f[j] = elem<T, WORDS>(u, j);
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
 * Reduces v over the G consecutive threads of a row; every thread of the
 * group gets the same bits.  All threads of the block must call it.
 */
template <int G, class Op>
static __device__ __forceinline__ float group_reduce(float v, float *red, Op op)
{
	constexpr int W = G < 32 ? G : 32;
#pragma unroll
	for (int o = W / 2; o > 0; o /= 2)
		v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
	if constexpr (G > 32) {
		constexpr int NW = G / 32;
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


struct ln_args {
	const void *x, *w, *b;
	void *y;
	int64_t R, C;
	float eps;
};

/* Threads of a block of rows of G threads. */
template <int G>
static __host__ __device__ constexpr int block_of(void)
{
	return G > BLOCK ? G : BLOCK;
}

/*
 * The row's statistics from the thread's ITEMS vectors of it in v (zeros
 * past the row's end): v is centred on the mean and 1/sqrt(var + eps) is
 * returned.  Two passes over registers, so no cancellation.  All threads
 * of the block must call it.
 */
template <int VEC, int ITEMS, int G>
static __device__ __forceinline__ float center_rstd(float (&v)[ITEMS][VEC],
						    int t, int64_t nv, float *red,
						    const struct ln_args &p)
{
	float s = 0.f, q = 0.f;

#pragma unroll
	for (int k = 0; k < ITEMS; k++)
#pragma unroll
		for (int j = 0; j < VEC; j++)
			s += v[k][j];
	const float mean = group_reduce<G>(s, red, op_sum()) / (float)p.C;

#pragma unroll
	for (int k = 0; k < ITEMS; k++) {
		const bool in = (int64_t)k * G + t < nv;
#pragma unroll
		for (int j = 0; j < VEC; j++) {
			v[k][j] -= mean;
			q += in ? v[k][j] * v[k][j] : 0.f;
		}
	}
	const float var = group_reduce<G>(q, red, op_sum()) / (float)p.C;
	return 1.f / sqrtf(var + p.eps);
}

/*
 * Row in registers: ITEMS vectors of VEC elements per thread.  The loads of
 * x, then of the thread's slices of w and b, are all issued before the
 * first reduction.
 */
template <typename T, int VEC, int ITEMS, int G>
__global__ void __launch_bounds__(block_of<G>()) layernorm_regs(struct ln_args p)
{
	constexpr int B = block_of<G>();
	__shared__ float red[B / 32];
	const T *x = (const T *)p.x, *w = (const T *)p.w, *b = (const T *)p.b;
	T *y = (T *)p.y;
	const int64_t row = (int64_t)blockIdx.x * (B / G) + threadIdx.x / G;
	const int t = threadIdx.x % G;
	const bool live = row < p.R;
	const int64_t nv = p.C / VEC, off = (live ? row : 0) * p.C;
	float v[ITEMS][VEC];
	uint4 wr[ITEMS], br[ITEMS];     /* w and b as loaded, 16 bytes each */

	static_assert(VEC * sizeof(T) == 16, "the register kernel is for 16-byte rows");

#pragma unroll
	for (int k = 0; k < ITEMS; k++) {
		const int64_t i = (int64_t)k * G + t;
		if (live && i < nv) {
			load_vec<T, VEC, true>(x + off + i * VEC, v[k]);
		} else {
#pragma unroll
			for (int j = 0; j < VEC; j++)
				v[k][j] = 0.f;
		}
	}
	/* w and b early, in their own dtype, where the registers allow */
	constexpr bool early = ITEMS * VEC <= 32;
	if constexpr (early)
#pragma unroll
		for (int k = 0; k < ITEMS; k++) {
			const int64_t i = (int64_t)k * G + t;
			if (live && i < nv) {
				wr[k] = __ldg(reinterpret_cast<const uint4 *>(w + i * VEC));
				br[k] = __ldg(reinterpret_cast<const uint4 *>(b + i * VEC));
			}
		}
	const float rstd = center_rstd<VEC, ITEMS, G>(v, t, nv, red, p);

#pragma unroll
	for (int k = 0; k < ITEMS; k++) {
		const int64_t i = (int64_t)k * G + t;

		if (!live || i >= nv)
			continue;
		if constexpr (!early) {
			wr[k] = __ldg(reinterpret_cast<const uint4 *>(w + i * VEC));
			br[k] = __ldg(reinterpret_cast<const uint4 *>(b + i * VEC));
		}
#pragma unroll
		for (int j = 0; j < VEC; j++)
			v[k][j] = v[k][j] * rstd * elem<T, true>(wr[k], j) +
				  elem<T, true>(br[k], j);
		store_vec<T, VEC>(y + off + i * VEC, v[k]);
	}
}

/*
 * The same for rows that fit with w and b early, when they take more than
 * one wave of blocks: persistent, a grid of the blocks the device holds at
 * once (PER_SM a multiprocessor when set, else as many as fit), each block
 * walking rows a grid apart.  w and b are loaded once per thread for all
 * its rows, and the next row's x is loaded, raw, before this row's
 * reductions, so its latency hides under them and the stores (4096x2048
 * f16 on an H200, against the kernel before it in one run: 14.85 -> 14.02
 * us).
 */
template <typename T, int VEC, int ITEMS, int G>
__global__ void __launch_bounds__(block_of<G>()) layernorm_pipe(struct ln_args p)
{
	constexpr int B = block_of<G>(), RB = B / G;
	__shared__ float red[B / 32];
	const T *x = (const T *)p.x, *w = (const T *)p.w, *b = (const T *)p.b;
	T *y = (T *)p.y;
	const int t = threadIdx.x % G;
	const int64_t nv = p.C / VEC, stride = (int64_t)gridDim.x * RB;
	uint4 nx[ITEMS], wr[ITEMS], br[ITEMS];
	int64_t row = (int64_t)blockIdx.x * RB + threadIdx.x / G;

	static_assert(VEC * sizeof(T) == 16, "the register kernel is for 16-byte rows");
#pragma unroll
	for (int k = 0; k < ITEMS; k++) {
		const int64_t i = (int64_t)k * G + t;
		if (i < nv) {
			wr[k] = __ldg(reinterpret_cast<const uint4 *>(w + i * VEC));
			br[k] = __ldg(reinterpret_cast<const uint4 *>(b + i * VEC));
			if (row < p.R)
				nx[k] = __ldg(reinterpret_cast<const uint4 *>(x + row * p.C + i * VEC));
		}
	}
	/* every group of the block takes the same number of turns: the
	 * reductions synchronize the block */
	for (int64_t first = (int64_t)blockIdx.x * RB; first < p.R;
	     first += stride, row += stride) {
		const bool live = row < p.R;
		const int64_t next = row + stride;
		float v[ITEMS][VEC];

#pragma unroll
		for (int k = 0; k < ITEMS; k++) {
			const bool in = live && (int64_t)k * G + t < nv;
#pragma unroll
			for (int j = 0; j < VEC; j++)
				v[k][j] = in ? elem<T>(nx[k], j) : 0.f;
		}
#pragma unroll
		for (int k = 0; k < ITEMS; k++) {
			const int64_t i = (int64_t)k * G + t;
			if (next < p.R && i < nv)
				nx[k] = __ldg(reinterpret_cast<const uint4 *>(x + next * p.C + i * VEC));
		}
		const float rstd = center_rstd<VEC, ITEMS, G>(v, t, nv, red, p);

#pragma unroll
		for (int k = 0; k < ITEMS; k++) {
			const int64_t i = (int64_t)k * G + t;

			if (!live || i >= nv)
				continue;
#pragma unroll
			for (int j = 0; j < VEC; j++)
				v[k][j] = v[k][j] * rstd * elem<T>(wr[k], j) + elem<T>(br[k], j);
			store_vec<T, VEC>(y + row * p.C + i * VEC, v[k]);
		}
	}
}

/* Blocks of kernel k, of B threads, one multiprocessor holds. */
static int per_sm(const void *k, int B)
{
	int n = 0;

	cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, k, B, 0);
	return n > 0 ? n : 1;
}

/* One wave of the register kernel, and the persistent kernel's grid
 * (PER_SM blocks a multiprocessor when set, else all that fit); asked
 * once, since a runner uses one device and the calls are timed. */
template <typename T, int VEC, int ITEMS, int G>
static void waves(int64_t *regs_wave, int64_t *pipe_grid)
{
	static int64_t wave, grid;

	if (!wave) {
		int dev = 0, sms = 0, pipe;

		cudaGetDevice(&dev);
		cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
		pipe = per_sm((const void *)layernorm_pipe<T, VEC, ITEMS, G>,
			      block_of<G>());
		if (PER_SM > 0 && PER_SM < pipe)
			pipe = PER_SM;
		grid = (int64_t)(sms > 0 ? sms : 1) * pipe;
		wave = (int64_t)(sms > 0 ? sms : 1) * per_sm((const void *)
			layernorm_regs<T, VEC, ITEMS, G>, block_of<G>());
	}
	*regs_wave = wave;
	*pipe_grid = grid;
}

/* Rows too long for registers: mean pass, variance pass, output pass. */
template <typename T, int VEC, int G>
__global__ void __launch_bounds__(block_of<G>()) layernorm_long(struct ln_args p)
{
	constexpr int B = block_of<G>();
	__shared__ float red[B / 32];
	const T *x = (const T *)p.x, *w = (const T *)p.w, *b = (const T *)p.b;
	T *y = (T *)p.y;
	const int64_t row = (int64_t)blockIdx.x * (B / G) + threadIdx.x / G;
	const int t = threadIdx.x % G;
	const bool live = row < p.R;
	const int64_t nv = live ? p.C / VEC : 0, off = (live ? row : 0) * p.C;
	float f[VEC], wf[VEC], bf[VEC], s = 0.f, q = 0.f;

	for (int64_t i = t; i < nv; i += G) {
		load_vec<T, VEC>(x + off + i * VEC, f);
#pragma unroll
		for (int j = 0; j < VEC; j++)
			s += f[j];
	}
	const float mean = group_reduce<G>(s, red, op_sum()) / (float)p.C;
	for (int64_t i = t; i < nv; i += G) {
		load_vec<T, VEC>(x + off + i * VEC, f);
#pragma unroll
		for (int j = 0; j < VEC; j++)
			q += (f[j] - mean) * (f[j] - mean);
	}
	const float var = group_reduce<G>(q, red, op_sum()) / (float)p.C;
	const float rstd = 1.f / sqrtf(var + p.eps);
	for (int64_t i = t; i < nv; i += G) {
		load_vec<T, VEC>(x + off + i * VEC, f);
		load_vec<T, VEC>(w + i * VEC, wf);
		load_vec<T, VEC>(b + i * VEC, bf);
#pragma unroll
		for (int j = 0; j < VEC; j++)
			f[j] = (f[j] - mean) * rstd * wf[j] + bf[j];
		store_vec<T, VEC>(y + off + i * VEC, f);
	}
}

/* Launches the register kernel with the smallest ITEMS that holds the row. */
template <typename T, int VEC, int G, int ITEMS>
static bool launch_regs(int64_t per, int64_t grid, cudaStream_t st,
			const struct ln_args &p)
{
	if constexpr (ITEMS * VEC <= MAX_FLOATS) {
		if (per <= ITEMS) {
			/* more than one wave of blocks: persistent */
			if constexpr (PERSIST && G == GROUP && ITEMS * VEC <= 32) {
				int64_t wave, most;

				waves<T, VEC, ITEMS, G>(&wave, &most);
				if (grid > wave) {
					layernorm_pipe<T, VEC, ITEMS, G><<<most, block_of<G>(), 0, st>>>(p);
					return true;
				}
			}
			layernorm_regs<T, VEC, ITEMS, G><<<grid, block_of<G>(), 0, st>>>(p);
			return true;
		}
		return launch_regs<T, VEC, G, ITEMS * 2>(per, grid, st, p);
	}
	return false;
}

template <typename T, int VEC, int G>
static void launch(cudaStream_t st, const struct ln_args &p)
{
	constexpr int rows = block_of<G>() / G;
	const int64_t grid = (p.R + rows - 1) / rows;
	const int64_t per = (p.C / VEC + G - 1) / G;

	/* unaligned rows (VEC 1) stream: see the top comment */
	if constexpr (VEC > 1)
		if (launch_regs<T, VEC, G, 1>(per, grid, st, p))
			return;
	layernorm_long<T, VEC, G><<<grid, block_of<G>(), 0, st>>>(p);
}

static bool aligned16(const void *p)
{
	return ((uintptr_t)p & 15) == 0;
}

/*
 * Many rows: GROUP threads a row, or WIDE_GROUP where GROUP would hold
 * more than two words a thread (16384x4096 f16: four words and 151
 * registers in the persistent kernel, one block of 256 threads a
 * multiprocessor; at 256 threads a row, two words and more blocks).
 */
template <typename T, int VEC>
static void launch_rows(cudaStream_t st, const struct ln_args &p)
{
	if (p.R < FEW_ROWS && p.C / VEC >= FEW_GROUP)
		launch<T, VEC, FEW_GROUP>(st, p);
	else if (WIDE_GROUP > GROUP && p.C / VEC > 2 * GROUP)
		launch<T, VEC, WIDE_GROUP>(st, p);
	else
		launch<T, VEC, GROUP>(st, p);
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
		launch_rows<T, V>(st, p);
	else
		launch_rows<T, 1>(st, p);
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
