/*
 * reduce: y[r] = sum of x[r,:], f32 accumulation.
 *
 * Why it is fast: it is a pure read of x, so the kernel's only job is to
 * keep HBM busy from the first cycle to the last.  A group of G threads
 * owns a row and covers it in as few trips as possible: G is the smallest
 * power of two (32 to MAXG) for which G threads x UNROLL 16-byte loads hold
 * the whole row, so most rows are read in ONE round trip to memory, with
 * every load of a thread issued before the first add.  The kernel is
 * compiled for at most 64 registers at 1024 threads per multiprocessor
 * (the launch bound): an earlier version let ptxas aim at 2048 threads,
 * which squeezed it to 32 registers and made it interleave loads and adds,
 * so only part of a thread's loads were in flight (slow on short,
 * latency-bound shapes).
 * Rows per block shrink when there are too few rows to give every
 * multiprocessor several blocks (1x4096, 64x8192, 256x32768 get one row
 * per block, 2048x2048 one warp per row), and stay at BLOCK/G otherwise
 * (8192x8192 f16: G = 128, two rows per block, each thread 8 x 16 B).
 *
 * Each thread keeps UNROLL independent partial sums; the group sum is a
 * warp butterfly plus, for groups wider than a warp, a fixed-order pass
 * over the group's warps: bitwise deterministic, no atomics.  Rows that
 * are not a multiple of 16 bytes (or a misaligned x) take the same kernel
 * one element per load.
 *
 * Few long rows (1x16777216: one row, one block, one multiprocessor busy
 * of 132) are split: each of S blocks of a row sums one chunk into the
 * workspace, then one warp per row adds the S partial sums in a fixed
 * order.  S is chosen so that the rows' chunks fill the device FILL
 * times over; still deterministic, still no atomics.
 */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>
#include "autokernel.h"

#define BLOCK 256  /* autokernel: tune 128,256,512,1024 */
#define MAXG 1024  /* autokernel: tune 128,256,512,1024 */
#define UNROLL 8   /* autokernel: tune 4,8 */
#define FILL 4     /* autokernel: tune 2,4,8 */

/* Threads per multiprocessor the launch bounds are written for: 64 regs. */
#define SM_THREADS 1024

static __device__ __forceinline__ float to_f32(float x) { return x; }
static __device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }
static __device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> static __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_f32<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

/*
 * 16 bytes at p when ok, else zeros: one predicated load, no branch, so
 * every load of a thread goes out back to back.  x is read once: no L1
 * allocation.
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

/* One element at p when ok, else 0 (VEC == 1 path: ragged or misaligned). */
template <typename T>
static __device__ __forceinline__ float ld_one(const T *p, bool ok)
{
	return ok ? to_f32(__ldg(p)) : 0.f;
}

/* Sum of the VEC elements of T in a 16-byte word. */
template <typename T>
static __device__ __forceinline__ float sum16(uint4 u)
{
	const T *e = reinterpret_cast<const T *>(&u);
	constexpr int VEC = 16 / sizeof(T);
	float s = 0.f;
#pragma unroll
	for (int j = 0; j < VEC; j++)
		s += to_f32(e[j]);
	return s;
}

/* Threads a block of the G-wide kernel may have (the launch bound). */
template <int G> struct tb { static constexpr int n = G > BLOCK ? G : BLOCK; };

/*
 * Sum over the G consecutive threads of a row, in a fixed order.  Every
 * thread of the block calls it once.
 */
template <int G>
static __device__ __forceinline__ float group_sum(float v)
{
#pragma unroll
	for (int o = 16; o > 0; o /= 2)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	if constexpr (G > 32) {
		constexpr int NW = G / 32;
		__shared__ float red[tb<G>::n / 32];
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

/*
 * G threads a row, blockDim.x / G rows a block.  VEC > 1: 16-byte loads
 * (C % VEC == 0, x aligned); VEC == 1: one element per load.
 */
template <typename T, int VEC, int G>
__global__ void __launch_bounds__(tb<G>::n, SM_THREADS / tb<G>::n)
reduce_rows(const T *__restrict__ x, T *__restrict__ y, int64_t R, int64_t C)
{
	const int64_t row = (int64_t)blockIdx.x * (blockDim.x / G) + threadIdx.x / G;
	const int t = threadIdx.x % G;
	const bool live = row < R;
	const int64_t nv = live ? C / VEC : 0;
	const T *xr = x + (live ? row : 0) * C;
	float part[UNROLL];

#pragma unroll
	for (int u = 0; u < UNROLL; u++)
		part[u] = 0.f;
	for (int64_t base = t; base < nv; base += (int64_t)G * UNROLL) {
		if constexpr (VEC > 1) {
			uint4 f[UNROLL];
#pragma unroll
			for (int u = 0; u < UNROLL; u++) {
				const int64_t i = base + (int64_t)u * G;
				f[u] = ld_stream(xr + i * VEC, i < nv);
			}
#pragma unroll
			for (int u = 0; u < UNROLL; u++)
				part[u] += sum16<T>(f[u]);
		} else {
			float f[UNROLL];
#pragma unroll
			for (int u = 0; u < UNROLL; u++) {
				const int64_t i = base + (int64_t)u * G;
				f[u] = ld_one(xr + i, i < nv);
			}
#pragma unroll
			for (int u = 0; u < UNROLL; u++)
				part[u] += f[u];
		}
	}
	float s = 0.f;
#pragma unroll
	for (int u = 0; u < UNROLL; u++)
		s += part[u];
	s = group_sum<G>(s);
	if (live && t == 0)
		y[row] = from_f32<T>(s);
}

/* ---- shared: sm-count (kept equal in matmul.cu, fused_mlp.cu, reduce.cu, softmax.cu, flash_attention.cu; tests/t0023-kernel-twins.sh) ---- */
/* Attribute a of the current device, asked once into *n (fallback if it
 * cannot tell). */
static int device_attr(int *n, cudaDeviceAttr a, int fallback)
{
	if (*n <= 0) {
		int d = 0;

		if (cudaGetDevice(&d) != cudaSuccess ||
		    cudaDeviceGetAttribute(n, a, d) != cudaSuccess || *n <= 0)
			*n = fallback;
		(void)cudaGetLastError();
	}
	return *n;
}

/* Multiprocessors of the current device (132 if it cannot tell). */
static int sm_count(void)
{
	static int n;

	return device_attr(&n, cudaDevAttrMultiProcessorCount, 132);
}
/* ---- end shared: sm-count ---- */

/*
 * Launches the G-wide kernel with the smallest G (32 .. MAXG) that covers
 * a row of nv loads in one trip, or MAXG.  Rows per block: BLOCK / G,
 * halved while that leaves fewer than FILL blocks per multiprocessor.
 */
template <typename T, int VEC, int G>
static void launch(const T *x, T *y, int64_t R, int64_t C, cudaStream_t st)
{
	const int64_t nv = C / VEC;

	if constexpr (G < MAXG) {
		if (nv > (int64_t)G * UNROLL) {
			launch<T, VEC, G * 2>(x, y, R, C, st);
			return;
		}
	}
	int rows = tb<G>::n / G;
	while (rows > 1 && (R + rows - 1) / rows < (int64_t)FILL * sm_count())
		rows /= 2;
	const int64_t grid = (R + rows - 1) / rows;
	reduce_rows<T, VEC, G><<<grid, rows * G, 0, st>>>(x, y, R, C);
}

static bool aligned16(const void *p)
{
	return ((uintptr_t)p & 15) == 0;
}

/* ---- few long rows: chunks, then the partial sums ---- */

#define SPLIT_MIN 32768    /* elements a row needs to be split */
#define CHUNK_MIN 8192     /* elements a chunk holds at least */

/* Chunks a row is split into: 1 when the rows fill the device already. */
static int64_t chunks(int64_t R, int64_t C)
{
	const int64_t want = (int64_t)FILL * sm_count();
	int64_t s;

	if (C < SPLIT_MIN || R >= want)
		return 1;
	s = (want + R - 1) / R;
	if (s > C / CHUNK_MIN)
		s = C / CHUNK_MIN;
	return s > 1 ? s : 1;
}

/* Block (s, r) sums chunk s of row r (whole VEC words) into part[r * S + s]. */
template <typename T, int VEC>
__global__ void __launch_bounds__(BLOCK)
reduce_chunks(const T *__restrict__ x, float *__restrict__ part, int64_t C,
	      int64_t per)
{
	const int64_t r = blockIdx.y, s = blockIdx.x, S = gridDim.x;
	const int64_t nv = C / VEC, lo = s * per;
	const int64_t hi = lo + per < nv ? lo + per : nv;
	const T *xr = x + r * C;
	float acc[UNROLL];

#pragma unroll
	for (int u = 0; u < UNROLL; u++)
		acc[u] = 0.f;
	for (int64_t base = lo + threadIdx.x; base < hi;
	     base += (int64_t)BLOCK * UNROLL) {
		if constexpr (VEC > 1) {
			uint4 f[UNROLL];
#pragma unroll
			for (int u = 0; u < UNROLL; u++) {
				const int64_t i = base + (int64_t)u * BLOCK;
				f[u] = ld_stream(xr + i * VEC, i < hi);
			}
#pragma unroll
			for (int u = 0; u < UNROLL; u++)
				acc[u] += sum16<T>(f[u]);
		} else {
#pragma unroll
			for (int u = 0; u < UNROLL; u++) {
				const int64_t i = base + (int64_t)u * BLOCK;
				acc[u] += ld_one(xr + i, i < hi);
			}
		}
	}
	float v = 0.f;
#pragma unroll
	for (int u = 0; u < UNROLL; u++)
		v += acc[u];
	v = group_sum<BLOCK>(v);
	if (threadIdx.x == 0)
		part[r * S + s] = v;
}

/* One warp a row: the row's S partial sums in a fixed order. */
template <typename T>
__global__ void reduce_partials(const float *__restrict__ part,
				T *__restrict__ y, int64_t R, int64_t S)
{
	const int64_t r = (int64_t)blockIdx.x * (blockDim.x / 32) +
		threadIdx.x / 32;
	const int lane = threadIdx.x % 32;
	float v = 0.f;

	if (r >= R)
		return;
	for (int64_t s = lane; s < S; s += 32)
		v += part[r * S + s];
#pragma unroll
	for (int o = 16; o > 0; o /= 2)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	if (lane == 0)
		y[r] = from_f32<T>(v);
}

template <typename T, int VEC>
static void launch_split(const T *x, T *y, float *part, int64_t R, int64_t C,
			 int64_t S, cudaStream_t st)
{
	const int64_t nv = C / VEC, per = (nv + S - 1) / S;

	reduce_chunks<T, VEC><<<dim3((unsigned)S, (unsigned)R), BLOCK, 0, st>>>(
		x, part, C, per);
	reduce_partials<T><<<(unsigned)((R + 7) / 8), 256, 0, st>>>(part, y,
								   R, S);
}

static int64_t row_len(const struct ak_args *a)
{
	const struct ak_tensor *xt = &a->in[0];

	return xt->ndim ? xt->shape[xt->ndim - 1] : 1;
}

extern "C" size_t ak_workspace_size(const struct ak_args *a)
{
	const int64_t R = ak_numel(&a->out[0]), S = chunks(R, row_len(a));

	return S > 1 ? (size_t)(R * S) * sizeof(float) : 0;
}

template <typename T>
static int run(const struct ak_args *a)
{
	const struct ak_tensor *xt = &a->in[0];
	const int64_t C = row_len(a);
	const int64_t R = ak_numel(&a->out[0]);
	const T *x = (const T *)xt->data;
	T *y = (T *)a->out[0].data;
	cudaStream_t st = (cudaStream_t)a->stream;
	constexpr int V = 16 / sizeof(T);

	if (R == 0)
		return 0;
	if (R >= ((int64_t)1 << 31))
		return -1;
	const int64_t S = chunks(R, C);
	if (S > 1 && R < 65536 && a->workspace &&
	    a->workspace_size >= (size_t)(R * S) * sizeof(float)) {
		float *part = (float *)a->workspace;

		if (C % V == 0 && aligned16(x))
			launch_split<T, V>(x, y, part, R, C, S, st);
		else
			launch_split<T, 1>(x, y, part, R, C, S, st);
	} else if (C % V == 0 && aligned16(x))
		launch<T, V, 32>(x, y, R, C, st);
	else
		launch<T, 1, 32>(x, y, R, C, st);
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
