/*
 * softmax: y[r,:] = exp(x[r,:] - max) / sum(exp(x[r,:] - max)), f32 math.
 *
 * A group of threads owns one row: the smallest group, from a warp up to
 * 1024 threads, in which each thread holds at most ITEMS_MAX 16-byte
 * vectors, so short rows (8192x1024: a warp a row) keep every thread busy
 * with several loads in flight and long rows spread out.  The row stays
 * in registers, so HBM is read once and written once.  Max and sum are
 * butterfly warp shuffles, then a fixed-order pass over the group's warps
 * in shared memory: no atomics, so the output is bitwise deterministic.
 * Rows too long for registers, or whose length or pointers break 16-byte
 * alignment, take a streaming kernel, a block a row (online max and sum,
 * then a second read to normalize), that still moves 16-byte vectors
 * between a few lone elements at the row's ends.
 *
 * Few long rows (16x128256, 1x32000: a block a row leaves most of the
 * device idle) spread over a cluster of CLUSTER blocks on Hopper, where
 * they are aligned and fit its registers: each block holds its part of
 * the row, and the blocks swap their maxima, then their sums, through
 * distributed shared memory (each block adds the cluster's in the same
 * fixed order, so all agree bitwise), so HBM is still read once, in one
 * launch (kept by the hook on an H100 in session 24, f16, 2.2% over
 * issue 20's workload: 1x32000 8.42 -> 7.58 us, 16x128256 12.49 ->
 * 12.24, the rest level).  Elsewhere (32x50257: odd rows) they are
 * split into chunks: each block of a row finds its chunk's max and sum
 * into the workspace, then each block combines its row's partials (the
 * same fixed order) and writes its chunk, whose x the first pass left
 * in L2.
 */
#include <cuda_runtime.h>
#include <cooperative_groups.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>
#include "autokernel.h"

#define BLOCK 256       /* autokernel: tune 128,256,512,1024 */
#define ITEMS_MAX 4     /* autokernel: tune 2,4,8 */

#define MAX_FLOATS 64   /* row floats a thread may hold in registers */

/* Threads of a block that serves groups of G threads. */
static __host__ __device__ constexpr int block_of_n(int G) { return G > BLOCK ? G : BLOCK; }
template <int G>
static __host__ __device__ constexpr int block_of() { return block_of_n(G); }

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
 * Reduces v over the G consecutive threads of a row; every thread of the
 * group gets the same bits.  All threads of the block must call it.
 */
template <int G, class Op>
static __device__ __forceinline__ float group_reduce(float v, Op op)
{
	constexpr int W = G < 32 ? G : 32;
#pragma unroll
	for (int o = W / 2; o > 0; o /= 2)
		v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
	if constexpr (G > 32) {
		__shared__ float red[block_of<G>() / 32];
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

/* exp(m_old - m_new), 0 when nothing was seen yet (avoids -inf - -inf). */
static __device__ __forceinline__ float rescale(float m_old, float m_new)
{
	return m_old == -INFINITY ? 0.f : expf(m_old - m_new);
}

/*
 * A row held in registers, ITEMS vectors of VEC a thread: vector
 * first + k * stride is the thread's k-th (where live and below nv).
 * row_load() loads them, the rest -inf, and gives the thread's max;
 * row_exp() turns them into exp(v - m) and gives their sum; row_store()
 * scales them by inv and stores them.  softmax_regs and softmax_cluster
 * differ only in the thread's vectors and in how max and sum are shared.
 */
template <typename T, int VEC, int ITEMS>
static __device__ __forceinline__ float row_load(const T *__restrict__ xr, float (&v)[ITEMS][VEC],
						 int64_t first, int64_t stride, int64_t nv, bool live)
{
	float m = -INFINITY;

#pragma unroll
	for (int k = 0; k < ITEMS; k++) {
		const int64_t i = first + k * stride;
		if (live && i < nv) {
			load_vec<T, VEC>(xr + i * VEC, v[k]);
		} else {
#pragma unroll
			for (int j = 0; j < VEC; j++)
				v[k][j] = -INFINITY;
		}
#pragma unroll
		for (int j = 0; j < VEC; j++)
			m = fmaxf(m, v[k][j]);
	}
	return m;
}

template <int VEC, int ITEMS>
static __device__ __forceinline__ float row_exp(float (&v)[ITEMS][VEC], float m)
{
	float s = 0.f;

#pragma unroll
	for (int k = 0; k < ITEMS; k++) {
#pragma unroll
		for (int j = 0; j < VEC; j++) {
			v[k][j] = expf(v[k][j] - m);
			s += v[k][j];
		}
	}
	return s;
}

template <typename T, int VEC, int ITEMS>
static __device__ __forceinline__ void row_store(T *__restrict__ yr, float (&v)[ITEMS][VEC], float inv,
						 int64_t first, int64_t stride, int64_t nv, bool live)
{
#pragma unroll
	for (int k = 0; k < ITEMS; k++) {
		const int64_t i = first + k * stride;
#pragma unroll
		for (int j = 0; j < VEC; j++)
			v[k][j] *= inv;
		if (live && i < nv)
			store_vec<T, VEC>(yr + i * VEC, v[k]);
	}
}

/* Row in registers: groups of G threads, ITEMS vectors of VEC each. */
template <typename T, int VEC, int ITEMS, int G>
__global__ void __launch_bounds__(block_of<G>())
softmax_regs(const T *__restrict__ x, T *__restrict__ y, int64_t R, int64_t C)
{
	const int64_t row = (int64_t)blockIdx.x * (block_of<G>() / G) + threadIdx.x / G;
	const int t = threadIdx.x % G;
	const bool live = row < R;
	const int64_t nv = C / VEC, off = (live ? row : 0) * C;
	float v[ITEMS][VEC];

	const float m = group_reduce<G>(row_load<T, VEC, ITEMS>(x + off, v, t, G, nv, live),
					op_max());
	const float inv = 1.f / group_reduce<G>(row_exp(v, m), op_sum());
	row_store<T, VEC, ITEMS>(y + off, v, inv, t, G, nv, live);
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

/*
 * The online max and sum (m, s) over vectors [lo, hi) of xr's span sp,
 * taken by thread t of n, and over its lone elements too where edges.
 */
template <typename T, int VEC>
static __device__ __forceinline__ void span_stats(const T *xr, int64_t C,
		row_span sp, int64_t lo, int64_t hi, int t, int n, bool edges,
		float &m, float &s)
{
	float f[VEC];

	for (int64_t i = lo + t; i < hi; i += n) {
		load_vec<T, VEC>(xr + sp.head + i * VEC, f);
		online_step<VEC>(f, m, s);
	}
	for (int64_t e = t; edges && e < C - sp.nv * VEC; e += n) {
		const float f1[1] = { to_f32(xr[sp.edge(e)]) };
		online_step<1>(f1, m, s);
	}
}

/* yr = exp(xr - mx) * inv over the same elements as span_stats(). */
template <typename T, int VEC>
static __device__ __forceinline__ void span_write(const T *xr, T *yr,
		int64_t C, row_span sp, int64_t lo, int64_t hi, int t, int n,
		bool edges, float mx, float inv)
{
	float f[VEC];

	for (int64_t i = lo + t; i < hi; i += n) {
		load_vec<T, VEC>(xr + sp.head + i * VEC, f);
#pragma unroll
		for (int j = 0; j < VEC; j++)
			f[j] = expf(f[j] - mx) * inv;
		store_vec<T, VEC>(yr + sp.head + i * VEC, f);
	}
	for (int64_t e = t; edges && e < C - sp.nv * VEC; e += n) {
		const int64_t k = sp.edge(e);
		yr[k] = from_f32<T>(expf(to_f32(xr[k]) - mx) * inv);
	}
}

/* Rows too long for registers, or not 16-byte aligned: a block a row, an
 * online max/sum pass, then a normalize pass (its x mostly from L2). */
template <typename T, int VEC>
__global__ void __launch_bounds__(BLOCK)
softmax_long(const T *__restrict__ x, T *__restrict__ y, int64_t C)
{
	const T *xr = x + (int64_t)blockIdx.x * C;
	const row_span sp = span_of<T, VEC>(xr, C);
	float m = -INFINITY, s = 0.f;

	span_stats<T, VEC>(xr, C, sp, 0, sp.nv, threadIdx.x, BLOCK, true, m, s);
	const float mx = group_reduce<BLOCK>(m, op_max());
	s *= rescale(m, mx);
	const float inv = 1.f / group_reduce<BLOCK>(s, op_sum());
	span_write<T, VEC>(xr, y + (int64_t)blockIdx.x * C, C, sp, 0, sp.nv,
			   threadIdx.x, BLOCK, true, mx, inv);
}

/*
 * Vectors of VEC a thread of a group of G may hold: ITEMS_MAX (a group
 * that needs more doubles instead), but for groups of 1024, which cannot,
 * and in any case no more than its registers allow: a block of 1024
 * threads gets 64 registers a thread, 32 floats of row; smaller blocks
 * 64 floats.
 */
static __host__ __device__ constexpr int most_items(int G, int VEC)
{
	const int cap = (block_of_n(G) >= 1024 ? MAX_FLOATS / 2 : MAX_FLOATS) / VEC;

	return G == 1024 || ITEMS_MAX > cap ? cap : ITEMS_MAX;
}

/*
 * Launches the register kernel for groups of G with the smallest ITEMS
 * (from ITEMS up to most_items()) that holds per vectors a thread; false
 * when none does.
 */
template <typename T, int VEC, int G, int ITEMS>
static bool launch_regs(int64_t per, cudaStream_t st, const T *x, T *y,
			int64_t R, int64_t C)
{
	if constexpr (ITEMS <= most_items(G, VEC)) {
		constexpr int rows = block_of<G>() / G;

		if (per <= ITEMS) {
			softmax_regs<T, VEC, ITEMS, G>
				<<<(R + rows - 1) / rows, block_of<G>(), 0, st>>>(x, y, R, C);
			return true;
		}
		return launch_regs<T, VEC, G, ITEMS * 2>(per, st, x, y, R, C);
	}
	return false;
}

/*
 * Rows in registers, C % VEC == 0: the smallest group (a warp up to 1024
 * threads) in which each thread holds at most most_items() vectors, so
 * short rows (8192x1024) keep every thread busy and many loads in
 * flight, and long ones spread.  False when the row is too long for
 * registers.  A group of 64 to 512 was chosen because half of it needed
 * more than most_items(), so it needs about that many: ITEMS starts there
 * (fewer kernels to build); a group of 1024 starts from its half's.
 */
template <typename T, int VEC>
static bool launch_rows(cudaStream_t st, const T *x, T *y, int64_t R, int64_t C)
{
	const int64_t nv = C / VEC;
	int g = 32;

	while (g < 1024 && (nv + g - 1) / g > most_items(g, VEC))
		g *= 2;
	const int64_t per = (nv + g - 1) / g;
	switch (g) {
	case 32:
		return launch_regs<T, VEC, 32, 1>(per, st, x, y, R, C);
	case 64:
		return launch_regs<T, VEC, 64, most_items(64, VEC)>(per, st, x, y, R, C);
	case 128:
		return launch_regs<T, VEC, 128, most_items(128, VEC)>(per, st, x, y, R, C);
	case 256:
		return launch_regs<T, VEC, 256, most_items(256, VEC)>(per, st, x, y, R, C);
	case 512:
		return launch_regs<T, VEC, 512, most_items(512, VEC)>(per, st, x, y, R, C);
	default:
		return launch_regs<T, VEC, 1024, most_items(512, VEC)>(per, st, x, y, R, C);
	}
}

static bool aligned16(const void *p)
{
	return ((uintptr_t)p & 15) == 0;
}

/* x and y equally far from a 16-byte boundary: their rows' spans match. */
static bool same_phase(const void *x, const void *y)
{
	return (((uintptr_t)x - (uintptr_t)y) & 15) == 0;
}

/* ---- few long rows: chunks ---- */

#define SPLIT_MIN 8192          /* elements a row needs to be split */
#define CHUNK_MIN 2048          /* elements a chunk holds at least */

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

/* Row r's span: its own where the rows are ODD (not all 16-byte aligned),
 * else all vectors, so aligned rows run the loop alone. */
template <typename T, int VEC, bool ODD>
static __device__ __forceinline__ row_span chunk_span(const T *xr, int64_t C)
{
	if constexpr (ODD)
		return span_of<T, VEC>(xr, C);
	return row_span{0, C / VEC, VEC};
}

/* Block (c, r): the max and the sum of exp(x - max) of chunk c of row r
 * (vectors [c * per, c * per + per) of its span; chunk 0 also takes the
 * lone elements), into part[2 * (r * S + c)]. */
template <typename T, int VEC, bool ODD>
__global__ void __launch_bounds__(BLOCK)
softmax_chunk_stats(const T *__restrict__ x, float *__restrict__ part,
		    int64_t C, int64_t per)
{
	const int64_t r = blockIdx.y, c = blockIdx.x, S = gridDim.x;
	const T *xr = x + r * C;
	const row_span sp = chunk_span<T, VEC, ODD>(xr, C);
	const int64_t lo = c * per, hi = lo + per < sp.nv ? lo + per : sp.nv;
	float m = -INFINITY, sum = 0.f;

	span_stats<T, VEC>(xr, C, sp, lo, hi, threadIdx.x, BLOCK, ODD && c == 0,
			   m, sum);
	const float mx = group_reduce<BLOCK>(m, op_max());
	sum = group_reduce<BLOCK>(sum * rescale(m, mx), op_sum());
	if (threadIdx.x == 0) {
		part[2 * (r * S + c)] = mx;
		part[2 * (r * S + c) + 1] = sum;
	}
}

/* Block (c, r): row r's max and sum from its partials, then chunk c. */
template <typename T, int VEC, bool ODD>
__global__ void __launch_bounds__(BLOCK)
softmax_chunk_write(const T *__restrict__ x, T *__restrict__ y,
		    const float *__restrict__ part, int64_t C, int64_t per)
{
	const int64_t r = blockIdx.y, c = blockIdx.x, S = gridDim.x;
	const T *xr = x + r * C;
	const row_span sp = chunk_span<T, VEC, ODD>(xr, C);
	const int64_t lo = c * per, hi = lo + per < sp.nv ? lo + per : sp.nv;
	const float *pr = part + 2 * r * S;
	float m = -INFINITY, sum = 0.f;

	for (int64_t k = threadIdx.x; k < S; k += BLOCK)
		m = fmaxf(m, pr[2 * k]);
	const float mx = group_reduce<BLOCK>(m, op_max());
	for (int64_t k = threadIdx.x; k < S; k += BLOCK)
		sum += pr[2 * k + 1] * rescale(pr[2 * k], mx);
	const float inv = 1.f / group_reduce<BLOCK>(sum, op_sum());
	span_write<T, VEC>(xr, y + r * C, C, sp, lo, hi, threadIdx.x, BLOCK,
			   ODD && c == 0, mx, inv);
}

template <typename T, int VEC, bool ODD>
static void launch_split(const T *x, T *y, float *part, int64_t R, int64_t C,
			 int64_t S, cudaStream_t st)
{
	const int64_t per = (C / VEC + S - 1) / S;
	const dim3 grid((unsigned)S, (unsigned)R);

	softmax_chunk_stats<T, VEC, ODD><<<grid, BLOCK, 0, st>>>(x, part, C, per);
	softmax_chunk_write<T, VEC, ODD><<<grid, BLOCK, 0, st>>>(x, y, part, C, per);
}

/* ---- few long rows: a cluster a row (Hopper) ---- */

#define CLUSTER 8               /* blocks a row (portable cluster size) */
#define CL_BLOCK 512            /* threads of each */
#define CL_ITEMS 4              /* vectors a thread holds at most */

/* Thread block clusters need compute capability 9.0 or later (0 where it
 * cannot be read: none). */
static bool have_clusters(void)
{
	static int cc;

	return device_attr(&cc, cudaDevAttrComputeCapabilityMajor, 0) >= 9;
}

/* v over the cluster: this block's in mine, the cluster's blocks' in
 * rank order (the same bits in every block), after a cluster barrier. */
template <class Op>
static __device__ __forceinline__ float cluster_reduce(float *mine, float v, Op op)
{
#if __CUDA_ARCH__ >= 900
	namespace cg = cooperative_groups;
	cg::cluster_group cl = cg::this_cluster();

	if (threadIdx.x == 0)
		*mine = v;
	cl.sync();
	v = *cl.map_shared_rank(mine, 0);
#pragma unroll
	for (int k = 1; k < CLUSTER; k++)
		v = op(v, *cl.map_shared_rank(mine, k));
#endif
	return v;
}

/* Row blockIdx.y over the CLUSTER blocks of its cluster, each holding
 * ITEMS vectors of VEC a thread (thread t of block b: vectors
 * b CL_BLOCK + t + k CLUSTER CL_BLOCK, so a warp's loads stay
 * contiguous). */
template <typename T, int VEC, int ITEMS>
__global__ void __launch_bounds__(CL_BLOCK)
softmax_cluster(const T *__restrict__ x, T *__restrict__ y, int64_t C)
{
#if __CUDA_ARCH__ >= 900
	__shared__ float red[2];        /* this block's max, then its sum */
	const int64_t off = (int64_t)blockIdx.y * C, nv = C / VEC;
	const int64_t first = (int64_t)blockIdx.x * CL_BLOCK + threadIdx.x;
	constexpr int64_t stride = (int64_t)CLUSTER * CL_BLOCK;
	float v[ITEMS][VEC];

	const float m = cluster_reduce(&red[0], group_reduce<CL_BLOCK>(
		row_load<T, VEC, ITEMS>(x + off, v, first, stride, nv, true), op_max()), op_max());
	const float inv = 1.f / cluster_reduce(&red[1], group_reduce<CL_BLOCK>(row_exp(v, m),
						op_sum()), op_sum());
	/* no block leaves (its shared memory with it) while another may
	 * still read its sum: arrive now, wait after the stores */
	asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
	row_store<T, VEC, ITEMS>(y + off, v, inv, first, stride, nv, true);
	asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
#endif
}

template <typename T, int VEC, int ITEMS>
static bool launch_cluster_items(cudaStream_t st, const T *x, T *y, int64_t R, int64_t C)
{
	cudaLaunchConfig_t cfg = {};
	cudaLaunchAttribute at[1];

	cfg.gridDim = dim3(CLUSTER, (unsigned)R);
	cfg.blockDim = dim3(CL_BLOCK);
	cfg.stream = st;
	at[0].id = cudaLaunchAttributeClusterDimension;
	at[0].val.clusterDim.x = CLUSTER;
	at[0].val.clusterDim.y = 1;
	at[0].val.clusterDim.z = 1;
	cfg.attrs = at;
	cfg.numAttrs = 1;
	if (cudaLaunchKernelEx(&cfg, softmax_cluster<T, VEC, ITEMS>, x, y, C) == cudaSuccess)
		return true;
	(void)cudaGetLastError();       /* the caller launches another way */
	return false;
}

/* A cluster a row where the row fits the cluster's registers: false
 * (nothing launched) where it does not, or the device has no clusters. */
template <typename T, int VEC>
static bool launch_cluster(cudaStream_t st, const T *x, T *y, int64_t R, int64_t C)
{
	const int64_t per = (C / VEC + CLUSTER * CL_BLOCK - 1) / (CLUSTER * CL_BLOCK);

	if (R > 65535 || !have_clusters())
		return false;
	if (per <= 1)
		return launch_cluster_items<T, VEC, 1>(st, x, y, R, C);
	if (per <= 2)
		return launch_cluster_items<T, VEC, 2>(st, x, y, R, C);
	if (per <= CL_ITEMS)
		return launch_cluster_items<T, VEC, CL_ITEMS>(st, x, y, R, C);
	return false;
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

/*
 * Few long rows split into chunks; rows in registers where they fit and
 * are aligned; else a block a row, streaming.  Rows of any length move
 * in 16-byte accesses where x and y are as far from a 16-byte boundary;
 * only where they are not (rare) does it go element by element.
 */
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
	const bool vec = same_phase(x, y);
	const bool aligned = C % V == 0 && aligned16(x) && aligned16(y);

	if (R == 0)
		return 0;
	const int64_t S = chunks(R, C);
	if (S > 1 && aligned && launch_cluster<T, V>(st, x, y, R, C)) {
		/* launched */
	} else if (S > 1 && a->workspace &&
	    a->workspace_size >= (size_t)(2 * R * S) * sizeof(float)) {
		float *part = (float *)a->workspace;

		if (aligned)
			launch_split<T, V, false>(x, y, part, R, C, S, st);
		else if (vec)
			launch_split<T, V, true>(x, y, part, R, C, S, st);
		else
			launch_split<T, 1, false>(x, y, part, R, C, S, st);
	} else if (aligned && launch_rows<T, V>(st, x, y, R, C)) {
		/* launched */
	} else if (vec)
		softmax_long<T, V><<<(unsigned)R, BLOCK, 0, st>>>(x, y, C);
	else
		softmax_long<T, 1><<<(unsigned)R, BLOCK, 0, st>>>(x, y, C);
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
