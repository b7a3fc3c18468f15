/*
 * cross_entropy: loss = mean over n of logsumexp(logits[n,:]) -
 * logits[n,target[n]], f32 math, f32 scalar output.
 *
 * Kernel 1: a group of GROUP threads owns one row (BLOCK/GROUP rows per
 * block) and streams it once with an online logsumexp: each thread keeps a
 * running max and a sum rescaled when the max grows (one extra exp per
 * vector of VEC, not per element), with UNROLL 16-byte loads in flight;
 * a row of odd length (GPT-2's 50257) or at any offset moves in 16-byte
 * loads too, between a few lone elements at its ends.  The
 * per-row loss goes to the workspace.  Kernel 2: one block sums the N losses
 * in a fixed order and divides by N.  No atomics: bitwise deterministic.
 * On Hopper kernel 2 is a programmatic dependent launch: kernel 1's blocks
 * let it start once they all run, and it waits (griddepcontrol.wait) for
 * kernel 1's end and its writes, so its launch is off the critical path
 * (1024x50257 f16 on an H200: 41.2 -> 39.0 us).
 */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>
#include "autokernel.h"

#define BLOCK 256  /* autokernel: tune 128,256,512,1024 */
#define GROUP 256  /* autokernel: tune 32,64,128,256,512,1024 if GROUP <= BLOCK */
#define UNROLL 2   /* autokernel: tune 1,2,4,8 */

#define FINAL_BLOCK 1024
#define PDL 1      /* autokernel: tune 0,1 (1: the mean a programmatic dependent launch) */

static __device__ __forceinline__ float to_f32(float x) { return x; }
static __device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }
static __device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }

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

/* ---- shared: row_span (kept equal in softmax.cu, cross_entropy.cu; tests/t0023-kernel-twins.sh) ---- */
/*
 * A row as a kernel streams it: head elements alone up to its
 * first 16-byte boundary, nv vectors of VEC, then the tail (fewer than
 * VEC, alone).  So a row of odd length (GPT-2's 50257) still moves in
 * 16-byte accesses.  Lone element e (of C - nv * VEC) is at edge(e).
 */
struct row_span {
	int64_t head, nv, vec;

	__device__ int64_t edge(int64_t e) const
	{
		return e < head ? e : head + nv * vec + (e - head);
	}
};

template <typename T, int VEC>
static __device__ __forceinline__ row_span span_of(const T *p, int64_t C)
{
	int64_t h = 0;

	if constexpr (VEC > 1) {
		h = (int64_t)((16 - ((uintptr_t)p & 15)) & 15) / (int64_t)sizeof(T);
		if (h > C)
			h = C;
	}
	return row_span{h, (C - h) / VEC, VEC};
}
/* ---- end shared: row_span ---- */

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
	return m_old == -INFINITY ? 0.f : __expf(m_old - m_new);
}

/* The online max m and sum s of exp(x - m), advanced by VEC values f. */
template <int VEC>
static __device__ __forceinline__ void online_step(const float (&f)[VEC],
						   float &m, float &s)
{
	float mn = m;
#pragma unroll
	for (int j = 0; j < VEC; j++)
		mn = fmaxf(mn, f[j]);
	/* all -inf so far (masked logits) adds 0, not exp(-inf - -inf) */
	const float base = mn == -INFINITY ? 0.f : mn;
	s *= rescale(m, mn);
#pragma unroll
	for (int j = 0; j < VEC; j++)
		s += __expf(f[j] - base);
	m = mn;
}

template <typename T, int VEC>
__global__ void __launch_bounds__(BLOCK)
row_loss(const T *__restrict__ x, const int64_t *__restrict__ target,
	 float *__restrict__ loss, int64_t N, int64_t V)
{
	__shared__ float red[BLOCK / 32];
	const int64_t row = (int64_t)blockIdx.x * (BLOCK / GROUP) + threadIdx.x / GROUP;
	const int t = threadIdx.x % GROUP;
	const bool live = row < N;
	const int64_t off = (live ? row : 0) * V;
	const T *xr = x + off;
	const row_span sp = span_of<T, VEC>(xr, live ? V : 0);
	float m = -INFINITY, s = 0.f;

#if __CUDA_ARCH__ >= 900
	/* the mean may be scheduled now; it waits for this grid's end */
	asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
	for (int64_t base = t; base < sp.nv; base += (int64_t)GROUP * UNROLL) {
		float f[UNROLL][VEC];
#pragma unroll
		for (int u = 0; u < UNROLL; u++) {
			const int64_t i = base + (int64_t)u * GROUP;
			if (i < sp.nv) {
				load_vec<T, VEC>(xr + sp.head + i * VEC, f[u]);
			} else {
#pragma unroll
				for (int j = 0; j < VEC; j++)
					f[u][j] = -INFINITY;
			}
		}
#pragma unroll
		for (int u = 0; u < UNROLL; u++)
			online_step<VEC>(f[u], m, s);
	}
	/* the elements before the row's first 16-byte boundary and after
	 * its last: fewer than 2 * VEC, one each */
	for (int64_t e = t; live && e < V - sp.nv * VEC; e += GROUP) {
		const float f1[1] = { to_f32(xr[sp.edge(e)]) };
		online_step<1>(f1, m, s);
	}
	const float mx = group_reduce(m, red, op_max());
	s *= rescale(m, mx);
	s = group_reduce(s, red, op_sum());
	if (live && t == 0) {
		const int64_t k = target[row];
		const float xt = (k >= 0 && k < V) ? to_f32(xr[k]) : NAN;
		loss[row] = logf(s) + mx - xt;
	}
}

/* One block: loss[0] = sum(row losses) / N, in a fixed order. */
__global__ void __launch_bounds__(FINAL_BLOCK)
mean_loss(const float *__restrict__ rows, float *__restrict__ out, int64_t N)
{
	__shared__ float red[FINAL_BLOCK / 32];
	float s = 0.f;

#if __CUDA_ARCH__ >= 900
	/* launched dependent on row_loss: its writes are visible after this */
	asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
	for (int64_t i = threadIdx.x; i < N; i += FINAL_BLOCK)
		s += rows[i];
#pragma unroll
	for (int o = 16; o > 0; o /= 2)
		s += __shfl_xor_sync(0xffffffffu, s, o);
	if (threadIdx.x % 32 == 0)
		red[threadIdx.x / 32] = s;
	__syncthreads();
	if (threadIdx.x == 0) {
		s = 0.f;
		for (int w = 0; w < FINAL_BLOCK / 32; w++)
			s += red[w];
		out[0] = s / (float)N;
	}
}

/* ---- shared: compute-capability (kept equal in matmul.cu, fused_mlp.cu, flash_attention.cu, cross_entropy.cu; tests/t0023-kernel-twins.sh) ---- */
/* The device's compute capability major (0 where it cannot be read), asked
 * once. */
static int cc_major(void)
{
	static int cc = -1;

	if (cc < 0) {
		int dev = 0, major = 0;

		if (cudaGetDevice(&dev) != cudaSuccess ||
		    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor,
					   dev) != cudaSuccess)
			major = 0;
		cc = major;
	}
	return cc;
}

/* wgmma needs compute capability 9.0 (the build targets sm_90a there). */
[[maybe_unused]] static bool have_wgmma(void)
{
	return cc_major() == 9;
}
/* ---- end shared: compute-capability ---- */

/* mean_loss after row_loss on st, as a dependent launch where it can be */
static cudaError_t launch_mean(const float *rows, float *out, int64_t N,
			       cudaStream_t st)
{
	cudaLaunchConfig_t cfg = {};
	cudaLaunchAttribute at[1];

	cfg.gridDim = dim3(1);
	cfg.blockDim = dim3(FINAL_BLOCK);
	cfg.stream = st;
	if (PDL && cc_major() >= 9) {   /* programmatic launches: cc 9.0 on */
		at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
		at[0].val.programmaticStreamSerializationAllowed = 1;
		cfg.attrs = at;
		cfg.numAttrs = 1;
	}
	return cudaLaunchKernelEx(&cfg, mean_loss, rows, out, N);
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
	const int64_t *target = (const int64_t *)a->in[1].data;
	float *rows = (float *)a->workspace;
	float *out = (float *)a->out[0].data;
	cudaStream_t st = (cudaStream_t)a->stream;
	constexpr int VW = 16 / sizeof(T);
	const int64_t grid = (N + BLOCK / GROUP - 1) / (BLOCK / GROUP);

	if (a->in[1].dtype != AK_I64 || a->out[0].dtype != AK_F32)
		return -1;
	if (N > 0) {
		if (!rows || a->workspace_size < (size_t)N * sizeof(float))
			return -1;
		row_loss<T, VW><<<grid, BLOCK, 0, st>>>(x, target, rows, N, V);
		if (cudaGetLastError() != cudaSuccess)
			return -1;
	}
	return launch_mean(rows, out, N, st) == cudaSuccess ? 0 : -1;
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
