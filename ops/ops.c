/*
 * ops.c: the nine ops of doc/ops.md.
 *
 * Each op is a `struct op` of small static functions: its tensors, the
 * inputs it generates, its fp64 reference one output row at a time, the
 * magnitude its tolerance is measured in, and its bytes and flops.  The
 * references read the inputs exactly as the kernel sees them (rounded to
 * the dtype) and compute in double, so the only error they leave to the
 * tolerance is the kernel's own.
 *
 * Tolerances assume f32 accumulation and one rounding of the output to its
 * dtype (u = 2^-11 for f16, 2^-8 for bf16): rtol is about twice u, and
 * atol covers results that cancel to near zero, where the error left is
 * the f32 arithmetic's, measured by row_scale where that grows with the
 * size of the terms.  The f32 numbers allow f32 arithmetic in any order,
 * fast exp and reciprocal square root, but not tf32.
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ops/dtype.h"
#include "ops/ops.h"
#include "ak-wire.h"

/* ---- random numbers ---- */

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

void rng_seed(struct rng *r, uint64_t seed)
{
	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

uint64_t rng_next(struct rng *r)
{
	uint64_t *s = r->s;
	uint64_t out = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return out;
}

double rng_uniform(struct rng *r)
{
	return (double)(rng_next(r) >> 11) * 0x1p-53;
}

double rng_normal(struct rng *r)
{
	/* Box-Muller; 1 - u is in (0, 1], so the log is finite */
	double u1 = 1.0 - rng_uniform(r);
	double u2 = rng_uniform(r);

	return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* ---- tensors ---- */

static void dense(struct ak_tensor *t, enum ak_dtype dt, int ndim,
		  const int64_t *shape)
{
	memset(t, 0, sizeof(*t));
	t->dtype = dt;
	t->ndim = ndim;
	for (int i = ndim - 1; i >= 0; i--) {
		t->shape[i] = shape[i];
		t->stride[i] = i == ndim - 1 ? 1 :
			t->stride[i + 1] * t->shape[i + 1];
	}
}

static double esize(enum ak_dtype dt)
{
	return (double)dtype_size(dt);
}

/* ---- input generation ---- */

static const char *const gen_names[GEN_KINDS] = {
	[GEN_NORMAL] = "normal", [GEN_UNIFORM] = "uniform",
	[GEN_LARGE] = "large", [GEN_TINY] = "tiny",
	[GEN_MIXED] = "mixed-scale", [GEN_EQUAL] = "all-equal",
	[GEN_ZERO] = "all-zero", [GEN_MASKED] = "masked",
};

const char *gen_name(enum gen_kind g)
{
	return gen_names[g];
}

/*
 * How an op's stability transforms treat its main input: the scale of
 * GEN_LARGE and GEN_TINY, the range of GEN_MIXED's per-row scales and
 * GEN_EQUAL's constant.  Each op picks them so the input stays finite in
 * the dtype and the reference output representable.
 */
struct stab {
	double large, tiny, lo, hi, equal;
};

/*
 * A stream of draws.  Normals come in Box-Muller pairs, both used: the
 * generator is most of the cost of a large problem's inputs.
 */
struct stream {
	struct rng r;
	double spare;
	int have_spare;
};

/* Independent streams per tensor, so one input's size moves no other. */
static void stream_init(struct stream *st, uint64_t seed, int stream)
{
	rng_seed(&st->r, seed ^ (UINT64_C(0xd1b54a32d192ed03) *
				 (uint64_t)(stream + 1)));
	st->have_spare = 0;
}

static double draw(struct stream *st, enum gen_kind kind)
{
	double u1, u2, rad;

	if (kind == GEN_UNIFORM)
		return 2.0 * rng_uniform(&st->r) - 1.0;
	if (st->have_spare) {
		st->have_spare = 0;
		return st->spare;
	}
	u1 = 1.0 - rng_uniform(&st->r);
	u2 = 6.283185307179586 * rng_uniform(&st->r);
	rad = sqrt(-2.0 * log(u1));
	st->spare = rad * sin(u2);
	st->have_spare = 1;
	return rad * cos(u2);
}

/* A normal's far tail must not round to infinity in f16. */
static void store(struct ak_tensor *t, int64_t i, double v, double lim)
{
	if (v > lim)
		v = lim;
	else if (v < -lim)
		v = -lim;
	dtype_store(t->dtype, t->data, i, v);
}

/*
 * Inputs are drawn in blocks of GEN_BLOCK elements, each from its own
 * stream, so that a large tensor fills in parallel and the result is the
 * same whatever the number of threads.
 */
#define GEN_BLOCK 65536

static void block_stream(struct stream *st, uint64_t seed, int stream,
			 int64_t block)
{
	stream_init(st, seed ^ (UINT64_C(0x9e3779b97f4a7c15) *
				(uint64_t)(block + 1)), stream);
}

static void fill(struct ak_tensor *t, uint64_t seed, int stream,
		 enum gen_kind kind, double mean, double sd)
{
	int64_t n = ak_numel(t), blocks = (n + GEN_BLOCK - 1) / GEN_BLOCK;
	double lim = dtype_max(t->dtype);

	#pragma omp parallel for schedule(static) if (blocks > 1)
	for (int64_t b = 0; b < blocks; b++) {
		struct stream st;
		int64_t end = (b + 1) * GEN_BLOCK < n ? (b + 1) * GEN_BLOCK : n;

		block_stream(&st, seed, stream, b);
		for (int64_t i = b * GEN_BLOCK; i < end; i++)
			store(t, i, mean + sd * draw(&st, kind), lim);
	}
}

static double transform(double v, enum gen_kind kind, const struct stab *p,
			double row_scale)
{
	switch (kind) {
	case GEN_LARGE:
		return v * p->large;
	case GEN_TINY:
		return v * p->tiny;
	case GEN_MIXED:
		return v * row_scale;
	case GEN_EQUAL:
		return p->equal;
	case GEN_ZERO:
		return 0.0;
	default:
		return v;
	}
}

/* GEN_MIXED's scale of row r: a hash of the seed and the row, so rows
 * can be filled in any order. */
static double row_mix_scale(uint64_t seed, int64_t r, const struct stab *p)
{
	struct rng g;

	rng_seed(&g, seed ^ UINT64_C(0x5851f42d4c957f2d) ^
		 (UINT64_C(0xbf58476d1ce4e5b9) * (uint64_t)(r + 1)));
	return p->lo * pow(p->hi / p->lo, rng_uniform(&g));
}

/*
 * GEN_MASKED's mask of row r of len: its first n elements are -inf, n a
 * hash of the seed and the row in [0, len), so a row is never all -inf.
 * Rows masked up to any point test what a softmax of masked scores or
 * of logits after top-k meets: whole vectors, a thread's first loads,
 * whole chunks of a row at -inf, where an online max and sum that takes
 * exp(-inf - -inf) turns the row into NaN.
 */
static int64_t mask_len(uint64_t seed, int64_t r, int64_t len)
{
	struct rng g;

	rng_seed(&g, seed ^ UINT64_C(0x94d049bb133111eb) ^
		 (UINT64_C(0xbf58476d1ce4e5b9) * (uint64_t)(r + 1)));
	return (int64_t)(rng_uniform(&g) * (double)len) % len;
}

/* The main input: N(0,1) or U(-1,1), then the stability transform. */
static void fill_main(struct ak_tensor *t, uint64_t seed,
		      enum gen_kind kind, const struct stab *p)
{
	int64_t n = ak_numel(t), len = t->shape[t->ndim - 1];
	int64_t blocks = (n + GEN_BLOCK - 1) / GEN_BLOCK;
	double lim = dtype_max(t->dtype);

	#pragma omp parallel for schedule(static) if (blocks > 1)
	for (int64_t b = 0; b < blocks; b++) {
		struct stream st;
		int64_t end = (b + 1) * GEN_BLOCK < n ? (b + 1) * GEN_BLOCK : n;
		int64_t masked = 0;     /* elements before it are -inf */
		double scale = 1.0, v;

		block_stream(&st, seed, 0, b);
		for (int64_t i = b * GEN_BLOCK; i < end; i++) {
			if (kind == GEN_MIXED && (i % len == 0 || i == b * GEN_BLOCK))
				scale = row_mix_scale(seed, i / len, p);
			if (kind == GEN_MASKED && (i % len == 0 || i == b * GEN_BLOCK))
				masked = i / len * len + mask_len(seed, i / len, len);
			v = transform(draw(&st, kind), kind, p, scale);
			if (i < masked)
				dtype_store(t->dtype, t->data, i, -INFINITY);
			else
				store(t, i, v, lim);
		}
	}
}

static struct stab stab_of(double large, double lo)
{
	struct stab p = { large, 1e-4, lo, large, 1.5 };

	return p;
}

/* ---- the benchmark's fresh inputs (ak-wire.h) ---- */

/* The power of two nearest v (an exact scale for ak_gen_normal()). */
static float pow2_near(double v)
{
	return (float)exp2(round(log2(v)));
}

void op_bench_gen(const struct op *op, const struct shape *s,
		  enum ak_dtype dt, struct ak_gen g[AK_OP_MAX_IN])
{
	for (int i = 0; i < AK_OP_MAX_IN; i++)
		g[i] = (struct ak_gen){ AK_GEN_NORMAL, 0.0f, 1.0f, 0 };
	if (op->bench_gen)
		op->bench_gen(s, dt, g);
}

void op_row_deps(const struct op *op, const struct shape *s, int64_t r,
		 const struct ak_tensor *in, int64_t lo[AK_OP_MAX_IN],
		 int64_t n[AK_OP_MAX_IN])
{
	for (int i = 0; i < op->n_in; i++) {
		lo[i] = 0;
		n[i] = ak_numel(&in[i]);
	}
	if (op->row_deps)
		op->row_deps(s, r, lo, n);
}

/* ---- reference helpers ---- */

static void load(const struct ak_tensor *t, int64_t off, int64_t n,
		 double *dst)
{
	dtype_load_span(t->dtype, t->data, off, n, dst);
}

static double at(const struct ak_tensor *t, int64_t i)
{
	return dtype_load(t->dtype, t->data, i);
}

/* Out of memory: a NaN reference fails the check instead of crashing. */
static void fail_row(double *ref, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		ref[i] = NAN;
}

static double *scratch(int64_t n)
{
	return malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
}

static double dot(const double *a, const double *b, int64_t n)
{
	double s = 0.0;

	for (int64_t i = 0; i < n; i++)
		s += a[i] * b[i];
	return s;
}

static double sum_sq(const struct ak_tensor *t, int64_t off, int64_t n)
{
	double s = 0.0, v;

	for (int64_t i = 0; i < n; i++) {
		v = at(t, off + i);
		s += v * v;
	}
	return s;
}

static int64_t one_row(const struct shape *s)
{
	(void)s;
	return 1;
}

static void no_scalars(const struct shape *s, double scalar[4])
{
	(void)s;
	memset(scalar, 0, 4 * sizeof(double));
}

/* ---- matmul: C[M,N] = A[M,K] B[K,N] ---- */

#define MM_M(s) ((s)->d[0])
#define MM_N(s) ((s)->d[1])
#define MM_K(s) ((s)->d[2])

static void matmul_tensors(const struct shape *s, enum ak_dtype dt,
			   struct ak_tensor *in, struct ak_tensor *out)
{
	dense(&in[0], dt, 2, (const int64_t[]){ MM_M(s), MM_K(s) });
	dense(&in[1], dt, 2, (const int64_t[]){ MM_K(s), MM_N(s) });
	dense(&out[0], dt, 2, (const int64_t[]){ MM_M(s), MM_N(s) });
}

static void matmul_generate(const struct shape *s, struct ak_tensor *in,
			    uint64_t seed, enum gen_kind kind)
{
	/* |C| ~ scale * sqrt(K); keep 16 sigma of it under f16's max */
	double large = 1e3;
	struct stab p;

	if (in[0].dtype == AK_F16)
		large = fmin(large, 65504.0 / (16.0 * sqrt((double)MM_K(s))));
	p = stab_of(large, 1e-3);
	fill_main(&in[0], seed, kind, &p);
	fill(&in[1], seed, 1, kind, 0.0, 1.0);
}

static int64_t matmul_rows(const struct shape *s)
{
	return MM_M(s);
}

static int64_t matmul_row_len(const struct shape *s)
{
	return MM_N(s);
}

static void matmul_reference(const struct shape *s,
			     const struct ak_tensor *in,
			     const double scalar[4], int64_t m, double *ref)
{
	int64_t N = MM_N(s), K = MM_K(s);
	double *a = scratch(K + N), *b;

	(void)scalar;
	if (!a) {
		fail_row(ref, N);
		return;
	}
	b = a + K;
	load(&in[0], m * K, K, a);
	memset(ref, 0, (size_t)N * sizeof(double));
	/* B row by row: contiguous, and C's row stays in cache */
	for (int64_t k = 0; k < K; k++) {
		if (a[k] == 0.0)
			continue;
		load(&in[1], k * N, N, b);
		for (int64_t n = 0; n < N; n++)
			ref[n] += a[k] * b[n];
	}
	free(a);
}

/* The size of a typical term sum: sqrt(K) * rms(A[m,:]) * rms(B). */
static double matmul_row_scale(const struct shape *s,
			       const struct ak_tensor *in,
			       const double scalar[4], int64_t m)
{
	int64_t K = MM_K(s), nb = K * MM_N(s);
	int64_t step = nb / 4096 + 1, cnt = 0;
	double sb = 0.0, v;

	(void)scalar;
	/* B is iid, so a strided sample of it gives its rms */
	for (int64_t i = 0; i < nb; i += step) {
		v = at(&in[1], i);
		sb += v * v;
		cnt++;
	}
	return sqrt(sum_sq(&in[0], m * K, K)) * sqrt(sb / (double)cnt);
}

static double matmul_bytes(const struct shape *s, enum ak_dtype dt)
{
	double M = MM_M(s), N = MM_N(s), K = MM_K(s);

	return (M * K + K * N + M * N) * esize(dt);
}

static double matmul_flops(const struct shape *s)
{
	return 2.0 * MM_M(s) * MM_N(s) * MM_K(s);
}

static void matmul_deps(const struct shape *s, int64_t r, int64_t *lo,
			int64_t *n)
{
	lo[0] = r * MM_K(s);
	n[0] = MM_K(s);
}

static const struct op op_matmul = {
	.name = "matmul",
	.summary = "C = A B",
	.dims = "M,N,K",
	.n_dims = 3,
	.n_in = 2,
	.n_out = 1,
	.in_names = { "A", "B" },
	.in_desc = { "A[M,K]", "B[K,N]" },
	.out_desc = "C[M,N] = A B",
	.scalar_desc = NULL,
	.compute_bound = 1,
	.smoke_shape = "16x16x16",
	.test_shapes = { "64x64x64", "256x256x256", "512x512x512",
			 "128x1024x512", "1024x128x256", "32x2048x256",
			 "1280x2048x64", "1024x2048x64", NULL },
	.edge_shapes = { "1x1x1", "3x7x5", "17x33x65", "127x129x63",
			 "1x1000x17", "257x1x300", "33x64x1", "100x3x1000",
			 NULL },
	.bench_shape = "2048x2048x2048",
	.host_bench_shape = "512x512x512",
	.stability = 1u << GEN_LARGE | 1u << GEN_TINY | 1u << GEN_MIXED |
		     1u << GEN_ZERO,
	.tol = { { 5e-4, 1e-3 }, { 4e-3, 8e-3 }, { 3e-5, 1e-5 } },
	.tol_why = "atol in units of sqrt(K)*rms(A row)*rms(B): f32 "
		   "accumulation error grows as sqrt(K) while one missing "
		   "term is 1/sqrt(K) of it; rtol ~2u of the output; tf32 "
		   "(error ~3e-4) fails f32",
	.tensors = matmul_tensors,
	.scalars = no_scalars,
	.generate = matmul_generate,
	.rows = matmul_rows,
	.row_len = matmul_row_len,
	.row_deps = matmul_deps,
	.reference = matmul_reference,
	.row_scale = matmul_row_scale,
	.bytes = matmul_bytes,
	.flops = matmul_flops,
};

/* ---- row ops over x[R,C]: softmax, layernorm, rmsnorm, reduce ---- */

#define ROW_R(s) ((s)->d[0])
#define ROW_C(s) ((s)->d[1])

static void rc_tensors(const struct shape *s, enum ak_dtype dt,
		       struct ak_tensor *in, struct ak_tensor *out)
{
	dense(&in[0], dt, 2, (const int64_t[]){ ROW_R(s), ROW_C(s) });
	dense(&out[0], dt, 2, (const int64_t[]){ ROW_R(s), ROW_C(s) });
}

static int64_t rc_rows(const struct shape *s)
{
	return ROW_R(s);
}

static int64_t rc_row_len(const struct shape *s)
{
	return ROW_C(s);
}

/* ---- softmax ---- */

static void softmax_generate(const struct shape *s, struct ak_tensor *in,
			     uint64_t seed, enum gen_kind kind)
{
	/* x100 puts row maxima past 88, where exp() overflows f32 */
	struct stab p = stab_of(100.0, 1e-3);

	(void)s;
	fill_main(&in[0], seed, kind, &p);
}

static void softmax_reference(const struct shape *s,
			      const struct ak_tensor *in,
			      const double scalar[4], int64_t r, double *ref)
{
	int64_t C = ROW_C(s);
	double m = -INFINITY, sum = 0.0;

	(void)scalar;
	load(&in[0], r * C, C, ref);
	for (int64_t c = 0; c < C; c++)
		m = fmax(m, ref[c]);
	for (int64_t c = 0; c < C; c++) {
		ref[c] = exp(ref[c] - m);
		sum += ref[c];
	}
	for (int64_t c = 0; c < C; c++)
		ref[c] /= sum;
}

static double softmax_bytes(const struct shape *s, enum ak_dtype dt)
{
	return 2.0 * ROW_R(s) * ROW_C(s) * esize(dt);
}

/* max, subtract, exp, sum, divide: 5 per element */
static double softmax_flops(const struct shape *s)
{
	return 5.0 * ROW_R(s) * ROW_C(s);
}

/* Row r of a [R,C] output reads row r of x (and all of the others). */
static void rc_deps(const struct shape *s, int64_t r, int64_t *lo,
		    int64_t *n)
{
	lo[0] = r * ROW_C(s);
	n[0] = ROW_C(s);
}

static const struct op op_softmax = {
	.name = "softmax",
	.summary = "softmax of each row",
	.dims = "R,C",
	.n_dims = 2,
	.n_in = 1,
	.n_out = 1,
	.in_names = { "x" },
	.in_desc = { "x[R,C]" },
	.out_desc = "y[R,C] softmax over C",
	.scalar_desc = NULL,
	.compute_bound = 0,
	.smoke_shape = "4x32",
	.test_shapes = { "1x32000", "64x4096", "1024x1024", "4096x128",
			 "256x32000", "32x50257", NULL },
	.edge_shapes = { "1x1", "3x7", "17x1000", "127x4097", "5x1",
			 "1x65537", "33x129", "2x3000", NULL },
	.bench_shape = "4096x4096",
	.host_bench_shape = "1024x4096",
	.stability = 1u << GEN_LARGE | 1u << GEN_MIXED | 1u << GEN_EQUAL |
		     1u << GEN_ZERO | 1u << GEN_MASKED,
	.tol = { { 1e-6, 1e-3 }, { 1e-6, 8e-3 }, { 1e-8, 1e-4 } },
	.tol_why = "outputs are probabilities: rtol ~2u of the output; "
		   "f32 allows fast exp and exp2 with log2e folded into "
		   "inputs up to 600; atol covers f16 subnormals",
	.tensors = rc_tensors,
	.scalars = no_scalars,
	.generate = softmax_generate,
	.rows = rc_rows,
	.row_len = rc_row_len,
	.row_deps = rc_deps,
	.reference = softmax_reference,
	.bytes = softmax_bytes,
	.flops = softmax_flops,
};

/* ---- layernorm and rmsnorm ---- */

static void norm_tensors(const struct shape *s, enum ak_dtype dt,
			 struct ak_tensor *in, struct ak_tensor *out, int nw)
{
	rc_tensors(s, dt, in, out);
	for (int i = 1; i <= nw; i++)
		dense(&in[i], dt, 1, (const int64_t[]){ ROW_C(s) });
}

static void layernorm_tensors(const struct shape *s, enum ak_dtype dt,
			      struct ak_tensor *in, struct ak_tensor *out)
{
	norm_tensors(s, dt, in, out, 2);
}

static void rmsnorm_tensors(const struct shape *s, enum ak_dtype dt,
			    struct ak_tensor *in, struct ak_tensor *out)
{
	norm_tensors(s, dt, in, out, 1);
}

/*
 * In f16, x = 1e3 * N(0,1) squares past 65504: the sum of squares must be
 * f32.  bf16 and f32 go to 1e4.  0.5 as the equal value keeps the mean
 * of an all-equal row exact or one ulp off, whatever the division.
 */
static struct stab norm_stab(enum ak_dtype dt, double equal)
{
	struct stab p = stab_of(dt == AK_F16 ? 1e3 : 1e4, 1e-3);

	p.equal = equal;
	return p;
}

static void layernorm_generate(const struct shape *s, struct ak_tensor *in,
			       uint64_t seed, enum gen_kind kind)
{
	struct stab p = norm_stab(in[0].dtype, 0.5);

	(void)s;
	fill_main(&in[0], seed, kind, &p);
	fill(&in[1], seed, 1, kind, 1.0, 0.1);
	fill(&in[2], seed, 2, kind, 0.0, 0.1);
}

static void rmsnorm_generate(const struct shape *s, struct ak_tensor *in,
			     uint64_t seed, enum gen_kind kind)
{
	struct stab p = norm_stab(in[0].dtype, 1.5);

	(void)s;
	fill_main(&in[0], seed, kind, &p);
	fill(&in[1], seed, 1, kind, 1.0, 0.1);
}

static void layernorm_scalars(const struct shape *s, double scalar[4])
{
	no_scalars(s, scalar);
	scalar[0] = 1e-5;
}

static void rmsnorm_scalars(const struct shape *s, double scalar[4])
{
	no_scalars(s, scalar);
	scalar[0] = 1e-6;
}

static void layernorm_reference(const struct shape *s,
				const struct ak_tensor *in,
				const double scalar[4], int64_t r,
				double *ref)
{
	int64_t C = ROW_C(s);
	double mean = 0.0, var = 0.0, rstd;

	load(&in[0], r * C, C, ref);
	for (int64_t c = 0; c < C; c++)
		mean += ref[c];
	mean /= (double)C;
	for (int64_t c = 0; c < C; c++)
		var += (ref[c] - mean) * (ref[c] - mean);
	var /= (double)C;
	rstd = 1.0 / sqrt(var + scalar[0]);
	for (int64_t c = 0; c < C; c++)
		ref[c] = (ref[c] - mean) * rstd * at(&in[1], c) +
			 at(&in[2], c);
}

static void rmsnorm_reference(const struct shape *s,
			      const struct ak_tensor *in,
			      const double scalar[4], int64_t r, double *ref)
{
	int64_t C = ROW_C(s);
	double ms = 0.0, rstd;

	load(&in[0], r * C, C, ref);
	for (int64_t c = 0; c < C; c++)
		ms += ref[c] * ref[c];
	rstd = 1.0 / sqrt(ms / (double)C + scalar[0]);
	for (int64_t c = 0; c < C; c++)
		ref[c] = ref[c] * rstd * at(&in[1], c);
}

static double layernorm_bytes(const struct shape *s, enum ak_dtype dt)
{
	return (2.0 * ROW_R(s) * ROW_C(s) + 2.0 * ROW_C(s)) * esize(dt);
}

static double rmsnorm_bytes(const struct shape *s, enum ak_dtype dt)
{
	return (2.0 * ROW_R(s) * ROW_C(s) + ROW_C(s)) * esize(dt);
}

/* mean, variance (sub, square, add), normalize, scale, shift: 8 */
static double layernorm_flops(const struct shape *s)
{
	return 8.0 * ROW_R(s) * ROW_C(s);
}

/* square-add, normalize, scale: 4 per element */
static double rmsnorm_flops(const struct shape *s)
{
	return 4.0 * ROW_R(s) * ROW_C(s);
}

/* w ~ 1 and b ~ 0, as a trained norm's are */
static void norm_bench_gen(const struct shape *s, enum ak_dtype dt,
			   struct ak_gen *g)
{
	(void)s;
	(void)dt;
	g[1].mean = 1.0f;
	g[1].sd = 0.125f;
	g[2].sd = 0.125f;
}

static const struct op op_layernorm = {
	.name = "layernorm",
	.summary = "layer normalization of each row, biased variance",
	.dims = "R,C",
	.n_dims = 2,
	.n_in = 3,
	.n_out = 1,
	.in_names = { "x", "w", "b" },
	.in_desc = { "x[R,C]", "w[C]", "b[C]" },
	.out_desc = "y[R,C] = (x - mean) / sqrt(var + eps) * w + b",
	.scalar_desc = "scalar[0]=eps=1e-5",
	.compute_bound = 0,
	.smoke_shape = "4x32",
	.test_shapes = { "1x768", "64x1024", "256x4096", "1024x2048",
			 "2048x768", "16x8192", NULL },
	.edge_shapes = { "1x1", "3x7", "17x1000", "127x4097", "5x1",
			 "1x65537", "33x129", NULL },
	.bench_shape = "4096x2048",
	.host_bench_shape = "1024x2048",
	.stability = 1u << GEN_LARGE | 1u << GEN_TINY | 1u << GEN_MIXED |
		     1u << GEN_EQUAL | 1u << GEN_ZERO,
	.tol = { { 2e-4, 1e-3 }, { 1e-3, 8e-3 }, { 1e-4, 2e-5 } },
	.tol_why = "rtol ~2u of the output; atol: an all-equal row has "
		   "var 0, so a mean one f32 ulp off is multiplied by "
		   "1/sqrt(eps) = 316; tiny inputs expose eps placement",
	.tensors = layernorm_tensors,
	.scalars = layernorm_scalars,
	.generate = layernorm_generate,
	.rows = rc_rows,
	.row_len = rc_row_len,
	.bench_gen = norm_bench_gen,
	.row_deps = rc_deps,
	.reference = layernorm_reference,
	.bytes = layernorm_bytes,
	.flops = layernorm_flops,
};

static const struct op op_rmsnorm = {
	.name = "rmsnorm",
	.summary = "RMS normalization of each row",
	.dims = "R,C",
	.n_dims = 2,
	.n_in = 2,
	.n_out = 1,
	.in_names = { "x", "w" },
	.in_desc = { "x[R,C]", "w[C]" },
	.out_desc = "y[R,C] = x / sqrt(mean(x^2) + eps) * w",
	.scalar_desc = "scalar[0]=eps=1e-6",
	.compute_bound = 0,
	.smoke_shape = "4x32",
	.test_shapes = { "1x4096", "64x1024", "256x4096", "1024x2048",
			 "2048x768", "16x8192", NULL },
	.edge_shapes = { "1x1", "3x7", "17x1000", "127x4097", "5x1",
			 "1x65537", "33x129", NULL },
	.bench_shape = "4096x4096",
	.host_bench_shape = "1024x4096",
	.stability = 1u << GEN_LARGE | 1u << GEN_TINY | 1u << GEN_MIXED |
		     1u << GEN_EQUAL | 1u << GEN_ZERO,
	.tol = { { 1e-5, 1e-3 }, { 1e-5, 8e-3 }, { 1e-6, 1e-5 } },
	.tol_why = "a product, so relative: rtol ~2u of the output, f32 "
		   "allows sqrt(C) u of sum-of-squares error and fast rsqrt; "
		   "atol covers f16 subnormals",
	.tensors = rmsnorm_tensors,
	.scalars = rmsnorm_scalars,
	.generate = rmsnorm_generate,
	.rows = rc_rows,
	.row_len = rc_row_len,
	.bench_gen = norm_bench_gen,
	.row_deps = rc_deps,
	.reference = rmsnorm_reference,
	.bytes = rmsnorm_bytes,
	.flops = rmsnorm_flops,
};

/* ---- cross_entropy: mean over n of lse(logits[n,:]) - logits[n,t] ---- */

#define CE_N(s) ((s)->d[0])
#define CE_V(s) ((s)->d[1])

static void ce_tensors(const struct shape *s, enum ak_dtype dt,
		       struct ak_tensor *in, struct ak_tensor *out)
{
	dense(&in[0], dt, 2, (const int64_t[]){ CE_N(s), CE_V(s) });
	dense(&in[1], AK_I64, 1, (const int64_t[]){ CE_N(s) });
	dense(&out[0], AK_F32, 0, NULL);
}

static void ce_generate(const struct shape *s, struct ak_tensor *in,
			uint64_t seed, enum gen_kind kind)
{
	struct stab p = stab_of(100.0, 1e-3);
	struct stream st;
	int64_t V = CE_V(s), t;

	fill_main(&in[0], seed, kind, &p);
	stream_init(&st, seed, 1);
	for (int64_t n = 0; n < CE_N(s); n++) {
		/* masked logits: the target among those left */
		int64_t lo = kind == GEN_MASKED ? mask_len(seed, n, V) : 0;

		t = lo + (int64_t)(rng_uniform(&st.r) * (double)(V - lo));
		dtype_store(AK_I64, in[1].data, n, (double)(t < V ? t : V - 1));
	}
}

/* logsumexp(logits[n,:]) - logits[n,target[n]] in fp64; NaN for a
 * target out of range (or no memory). */
static double ce_row_loss(const struct shape *s, const struct ak_tensor *in,
			  int64_t n, double *x)
{
	int64_t V = CE_V(s), t = ((const int64_t *)in[1].data)[n];
	double m = -INFINITY, sum = 0.0;

	if (!x || t < 0 || t >= V)
		return NAN;
	load(&in[0], n * V, V, x);
	for (int64_t v = 0; v < V; v++)
		m = fmax(m, x[v]);
	for (int64_t v = 0; v < V; v++)
		sum += exp(x[v] - m);
	return m + log(sum) - x[t];
}

/* The mean over every row: the rows in parallel, summed in row order so
 * the reference does not depend on the number of threads. */
static void ce_reference(const struct shape *s, const struct ak_tensor *in,
			 const double scalar[4], int64_t r, double *ref)
{
	int64_t N = CE_N(s);
	double *loss = scratch(N), total = 0.0;

	(void)scalar;
	(void)r;
	if (!loss) {
		fail_row(ref, 1);
		return;
	}
	#pragma omp parallel if (N > 1)
	{
		double *x = scratch(CE_V(s));

		#pragma omp for schedule(static)
		for (int64_t n = 0; n < N; n++)
			loss[n] = ce_row_loss(s, in, n, x);
		free(x);
	}
	for (int64_t n = 0; n < N; n++)
		total += loss[n];
	ref[0] = total / (double)N;
	free(loss);
}

static double ce_bytes(const struct shape *s, enum ak_dtype dt)
{
	return (double)CE_N(s) * CE_V(s) * esize(dt) + 8.0 * CE_N(s) + 4.0;
}

/* max, subtract, exp, add: 4 per logit */
static double ce_flops(const struct shape *s)
{
	return 4.0 * CE_N(s) * CE_V(s);
}

static void ce_bench_gen(const struct shape *s, enum ak_dtype dt,
			 struct ak_gen *g)
{
	(void)dt;
	g[1].kind = AK_GEN_INDEX;
	g[1].n = CE_V(s);
}

static const struct op op_cross_entropy = {
	.name = "cross_entropy",
	.summary = "mean cross-entropy loss of logits against targets",
	.dims = "N,V",
	.n_dims = 2,
	.n_in = 2,
	.n_out = 1,
	.in_names = { "logits", "target" },
	.in_desc = { "logits[N,V]", "target[N] i64 in [0,V)" },
	.out_desc = "loss[] f32 = mean of lse(logits[n,:]) - logits[n,t]",
	.scalar_desc = NULL,
	.compute_bound = 0,
	.smoke_shape = "4x32",
	.test_shapes = { "1x32000", "64x32000", "256x32000", "512x4096",
			 "1024x1000", "16x50257", NULL },
	.edge_shapes = { "1x1", "1x7", "3x7", "17x1000", "127x4097",
			 "1x50257", "1000x3", NULL },
	.bench_shape = "4096x32000",
	.host_bench_shape = "256x32000",
	.stability = 1u << GEN_LARGE | 1u << GEN_MIXED | 1u << GEN_EQUAL |
		     1u << GEN_ZERO | 1u << GEN_MASKED,
	.tol = { { 1e-5, 2e-5 }, { 1e-5, 2e-5 }, { 1e-5, 2e-5 } },
	.tol_why = "the loss is f32 whatever the input dtype: f32 sums of "
		   "V exps and of N losses, fast exp; a target off by one "
		   "moves the mean by ~0.1/sqrt(N) of ~10",
	.tensors = ce_tensors,
	.scalars = no_scalars,
	.generate = ce_generate,
	.rows = one_row,
	.row_len = one_row,
	.bench_gen = ce_bench_gen,
	.reference = ce_reference,
	.bytes = ce_bytes,
	.flops = ce_flops,
};

/* ---- reduce: y[R] = sum over C ---- */

static void reduce_tensors(const struct shape *s, enum ak_dtype dt,
			   struct ak_tensor *in, struct ak_tensor *out)
{
	dense(&in[0], dt, 2, (const int64_t[]){ ROW_R(s), ROW_C(s) });
	dense(&out[0], dt, 1, (const int64_t[]){ ROW_R(s) });
}

static void reduce_generate(const struct shape *s, struct ak_tensor *in,
			    uint64_t seed, enum gen_kind kind)
{
	double C = (double)ROW_C(s), lim = dtype_max(in[0].dtype);
	struct stab p;

	/* a row sum is ~ scale * sqrt(C): 8 sigma of it must fit */
	p = stab_of(fmin(1e3, lim / (8.0 * sqrt(C))), 1e-3);
	/*
	 * All-equal rows sum exactly in f32 (1.25 has 3 significant bits)
	 * and stall an f16 accumulator at 2048 * 1.25.
	 */
	p.equal = 1.25;
	while (p.equal * C > lim / 2.0)
		p.equal /= 2.0;
	fill_main(&in[0], seed, kind, &p);
}

static int64_t reduce_row_len(const struct shape *s)
{
	(void)s;
	return 1;
}

static void reduce_reference(const struct shape *s,
			     const struct ak_tensor *in,
			     const double scalar[4], int64_t r, double *ref)
{
	int64_t C = ROW_C(s);
	double sum = 0.0;

	(void)scalar;
	for (int64_t c = 0; c < C; c++)
		sum += at(&in[0], r * C + c);
	ref[0] = sum;
}

/*
 * An f32 running sum of C zero-mean terms errs by ~0.4 u sigma C; sigma C
 * is sqrt(C * sum x^2), however much the row cancels.
 */
static double reduce_row_scale(const struct shape *s,
			       const struct ak_tensor *in,
			       const double scalar[4], int64_t r)
{
	int64_t C = ROW_C(s);

	(void)scalar;
	return sqrt((double)C * sum_sq(&in[0], r * C, C));
}

static double reduce_bytes(const struct shape *s, enum ak_dtype dt)
{
	return ((double)ROW_R(s) * ROW_C(s) + ROW_R(s)) * esize(dt);
}

/* one add per element */
static double reduce_flops(const struct shape *s)
{
	return (double)ROW_R(s) * ROW_C(s);
}

static const struct op op_reduce = {
	.name = "reduce",
	.summary = "sum of each row",
	.dims = "R,C",
	.n_dims = 2,
	.n_in = 1,
	.n_out = 1,
	.in_names = { "x" },
	.in_desc = { "x[R,C]" },
	.out_desc = "y[R] = sum over C",
	.scalar_desc = NULL,
	.compute_bound = 0,
	.smoke_shape = "4x32",
	/* 600x70000: rows that fill a GPU of up to 150 SMs, each longer
	 * than one trip of 1024 threads (the many-long-rows path) */
	.test_shapes = { "1x4096", "64x8192", "1024x1024", "4096x256",
			 "256x32768", "2048x2048", "600x70000", NULL },
	.edge_shapes = { "1x1", "3x7", "17x1000", "127x4097", "1000x3",
			 "1x65537", "4097x1", NULL },
	.bench_shape = "8192x8192",
	.host_bench_shape = "2048x4096",
	.stability = 1u << GEN_LARGE | 1u << GEN_TINY | 1u << GEN_MIXED |
		     1u << GEN_EQUAL | 1u << GEN_ZERO,
	.tol = { { 1e-6, 1e-3 }, { 1e-6, 8e-3 }, { 1e-6, 1e-6 } },
	.tol_why = "atol in units of sqrt(C * sum x^2): 16 u_f32 over a "
		   "running f32 sum's ~0.4 u; one dropped term is 1/C of "
		   "it; rtol ~2u of the output",
	.tensors = reduce_tensors,
	.scalars = no_scalars,
	.generate = reduce_generate,
	.rows = rc_rows,
	.row_len = reduce_row_len,
	.row_deps = rc_deps,
	.reference = reduce_reference,
	.row_scale = reduce_row_scale,
	.bytes = reduce_bytes,
	.flops = reduce_flops,
};

/* ---- [B,H,S,D] ops: rotary_embedding, flash_attention ---- */

#define BH_B(s) ((s)->d[0])
#define BH_H(s) ((s)->d[1])
#define BH_S(s) ((s)->d[2])
#define BH_D(s) ((s)->d[3])

static const int64_t *bhsd(const struct shape *s)
{
	return s->d;
}

static int64_t bhsd_rows(const struct shape *s)
{
	return BH_B(s) * BH_H(s) * BH_S(s);
}

static int64_t bhsd_row_len(const struct shape *s)
{
	return BH_D(s);
}

/* ---- rotary_embedding ---- */

static const char *rotary_check(const struct shape *s)
{
	if (BH_D(s) % 2)
		return "D must be even";
	return NULL;
}

static void rotary_tensors(const struct shape *s, enum ak_dtype dt,
			   struct ak_tensor *in, struct ak_tensor *out)
{
	const int64_t half[2] = { BH_S(s), BH_D(s) / 2 };

	dense(&in[0], dt, 4, bhsd(s));
	dense(&in[1], dt, 2, half);
	dense(&in[2], dt, 2, half);
	dense(&out[0], dt, 4, bhsd(s));
}

static void rotary_generate(const struct shape *s, struct ak_tensor *in,
			    uint64_t seed, enum gen_kind kind)
{
	struct stab p = stab_of(1e3, 1e-3);
	int64_t S = BH_S(s), half = BH_D(s) / 2;
	double theta;

	fill_main(&in[0], seed, kind, &p);
	/* real angles, so each (cos, sin) pair is a rotation */
	for (int64_t t = 0; t < S; t++) {
		for (int64_t i = 0; i < half; i++) {
			theta = (double)t * pow(10000.0, -2.0 * (double)i /
						(double)BH_D(s));
			dtype_store(in[1].dtype, in[1].data, t * half + i,
				    cos(theta));
			dtype_store(in[2].dtype, in[2].data, t * half + i,
				    sin(theta));
		}
	}
}

/*
 * The pair that rotates together: (x[2i], x[2i+1]) interleaved, or
 * (x[i], x[i+D/2]) half-split (rotate_half: Llama, Mistral, Qwen).
 */
static void rotary_pair(int64_t D, int layout, int64_t i, int64_t *a,
			int64_t *b)
{
	*a = layout == ROTARY_HALF ? i : 2 * i;
	*b = layout == ROTARY_HALF ? i + D / 2 : 2 * i + 1;
}

static void rotary_reference(const struct shape *s,
			     const struct ak_tensor *in,
			     const double scalar[4], int64_t r, double *ref)
{
	int64_t D = BH_D(s), half = D / 2, t = r % BH_S(s), ia, ib;
	int layout = scalar[0] == ROTARY_HALF ? ROTARY_HALF : 0;
	double a, b, c, sn;

	load(&in[0], r * D, D, ref);
	for (int64_t i = 0; i < half; i++) {
		rotary_pair(D, layout, i, &ia, &ib);
		a = ref[ia];
		b = ref[ib];
		c = at(&in[1], t * half + i);
		sn = at(&in[2], t * half + i);
		ref[ia] = a * c - b * sn;
		ref[ib] = a * sn + b * c;
	}
}

/* scalar[0] is the layout (problem.json "layout"); nothing else */
static void rotary_scalars(const struct shape *s, double scalar[4])
{
	double layout = scalar[0] == ROTARY_HALF ? ROTARY_HALF : 0;

	no_scalars(s, scalar);
	scalar[0] = layout;
}

/* a*cos - b*sin cancels; its f32 error is relative to the row's size */
static double rotary_row_scale(const struct shape *s,
			       const struct ak_tensor *in,
			       const double scalar[4], int64_t r)
{
	int64_t D = BH_D(s);

	(void)scalar;
	return sqrt(sum_sq(&in[0], r * D, D) / (double)D);
}

static double rotary_bytes(const struct shape *s, enum ak_dtype dt)
{
	double x = (double)bhsd_rows(s) * BH_D(s);

	return (2.0 * x + (double)BH_S(s) * BH_D(s)) * esize(dt);
}

/* two multiplies and an add per output element */
static double rotary_flops(const struct shape *s)
{
	return 3.0 * (double)bhsd_rows(s) * BH_D(s);
}

static const char *const rotary_layouts[] = { "interleaved", "half", NULL };

/* Row (b,h,s) reads that row of x and row s of cos and sin. */
static void rotary_deps(const struct shape *s, int64_t r, int64_t *lo,
			int64_t *n)
{
	int64_t half = BH_D(s) / 2, t = r % BH_S(s);

	lo[0] = r * BH_D(s);
	n[0] = BH_D(s);
	lo[1] = lo[2] = t * half;
	n[1] = n[2] = half;
}

static void rotary_bench_gen(const struct shape *s, enum ak_dtype dt,
			     struct ak_gen *g)
{
	(void)s;
	(void)dt;
	g[1].sd = g[2].sd = 0.5f;
}

static const struct op op_rotary = {
	.name = "rotary_embedding",
	.summary = "rotary position embedding, interleaved or half-split pairs",
	.dims = "B,H,S,D",
	.n_dims = 4,
	.n_in = 3,
	.n_out = 1,
	.in_names = { "x", "cos", "sin" },
	.in_desc = { "x[B,H,S,D]", "cos[S,D/2]", "sin[S,D/2]" },
	.out_desc = "y[B,H,S,D]: the pairs (x[2i], x[2i+1]) (interleaved) or "
		    "(x[i], x[i+D/2]) (half) rotated by (cos, sin)[s,i]",
	.scalar_desc = "scalar[0]=layout: 0 interleaved, 1 half (problem.json "
		       "\"layout\")",
	.layouts = rotary_layouts,
	.compute_bound = 0,
	.smoke_shape = "1x2x4x8",
	.test_shapes = { "1x8x128x64", "2x16x512x128", "1x32x1024x128",
			 "4x8x256x64", "1x4x64x256", NULL },
	.edge_shapes = { "1x1x1x2", "1x3x7x6", "2x5x17x10", "1x1x127x130",
			 "3x2x33x34", "1x2x9x126", NULL },
	.bench_shape = "2x32x1024x128",
	.host_bench_shape = "1x32x512x128",
	.stability = 1u << GEN_LARGE | 1u << GEN_MIXED | 1u << GEN_ZERO,
	.tol = { { 1e-4, 1e-3 }, { 1e-3, 8e-3 }, { 2e-6, 2e-6 } },
	.tol_why = "atol in units of rms(x row): a*cos - b*sin cancels to "
		   "~0 with f32 error ~2u|x| and f16 subnormal steps; rtol "
		   "~2u of the output",
	.check_shape = rotary_check,
	.tensors = rotary_tensors,
	.scalars = rotary_scalars,
	.generate = rotary_generate,
	.rows = bhsd_rows,
	.row_len = bhsd_row_len,
	.bench_gen = rotary_bench_gen,
	.row_deps = rotary_deps,
	.reference = rotary_reference,
	.row_scale = rotary_row_scale,
	.bytes = rotary_bytes,
	.flops = rotary_flops,
};

/* ---- flash_attention ---- */

static void attn_tensors(const struct shape *s, enum ak_dtype dt,
			 struct ak_tensor *in, struct ak_tensor *out)
{
	for (int i = 0; i < 3; i++)
		dense(&in[i], dt, 4, bhsd(s));
	dense(&out[0], dt, 4, bhsd(s));
}

static void attn_scalars(const struct shape *s, double scalar[4])
{
	no_scalars(s, scalar);
	scalar[0] = 1.0 / sqrt((double)BH_D(s));
}

static void attn_generate(const struct shape *s, struct ak_tensor *in,
			  uint64_t seed, enum gen_kind kind)
{
	/*
	 * q x50 gives scores ~ N(0, 50^2): a row's largest is past 88, where
	 * exp() overflows f32, and f32 error in the scores stays ~1e-4
	 */
	struct stab p = stab_of(50.0, 1e-3);

	(void)s;
	fill_main(&in[0], seed, kind, &p);
	fill(&in[1], seed, 1, kind, 0.0, 1.0);
	fill(&in[2], seed, 2, kind, 0.0, 1.0);
}

/*
 * Causal softmax weights of query row r: p[0..i], largest 1, and their
 * sum.  buf holds 2D doubles.  Returns the number of keys, i + 1.
 */
static int64_t attn_weights(const struct shape *s,
			    const struct ak_tensor *in, double scale,
			    int64_t r, double *buf, double *p, double *sum)
{
	int64_t S = BH_S(s), D = BH_D(s), i = r % S, base = (r - i) * D;
	double *q = buf, *k = buf + D, m = -INFINITY;

	load(&in[0], r * D, D, q);
	for (int64_t j = 0; j <= i; j++) {
		load(&in[1], base + j * D, D, k);
		p[j] = scale * dot(q, k, D);
		m = fmax(m, p[j]);
	}
	*sum = 0.0;
	for (int64_t j = 0; j <= i; j++) {
		p[j] = exp(p[j] - m);
		*sum += p[j];
	}
	return i + 1;
}

static void attn_reference(const struct shape *s,
			   const struct ak_tensor *in,
			   const double scalar[4], int64_t r, double *ref)
{
	int64_t S = BH_S(s), D = BH_D(s), base = (r - r % S) * D, n;
	double *buf = scratch(2 * D + S), *v, sum;

	if (!buf) {
		fail_row(ref, D);
		return;
	}
	v = buf + D;
	n = attn_weights(s, in, scalar[0], r, buf, buf + 2 * D, &sum);
	memset(ref, 0, (size_t)D * sizeof(double));
	for (int64_t j = 0; j < n; j++) {
		load(&in[2], base + j * D, D, v);
		for (int64_t d = 0; d < D; d++)
			ref[d] += buf[2 * D + j] * v[d];
	}
	for (int64_t d = 0; d < D; d++)
		ref[d] /= sum;
	free(buf);
}

/*
 * Rounding each weight p_j (to f16 or bf16 before P V, or by a fast exp)
 * moves o by about u * sqrt(sum p_j^2 v_j^2): 1 on the first rows, where
 * o is one v, and ~sqrt(e/n) on long rows, where o is a small average.
 */
static double attn_row_scale(const struct shape *s,
			     const struct ak_tensor *in,
			     const double scalar[4], int64_t r)
{
	int64_t S = BH_S(s), D = BH_D(s), base = (r - r % S) * D, n;
	double *buf = scratch(2 * D + S), *v, sum, acc = 0.0, pj;

	if (!buf)
		return NAN;
	v = buf + D;
	n = attn_weights(s, in, scalar[0], r, buf, buf + 2 * D, &sum);
	for (int64_t j = 0; j < n; j++) {
		pj = buf[2 * D + j] / sum;
		/* weights below 2^-40 of the largest add nothing */
		if (pj * sum < 0x1p-40)
			continue;
		load(&in[2], base + j * D, D, v);
		acc += pj * pj * dot(v, v, D) / (double)D;
	}
	free(buf);
	return sqrt(acc);
}

static double attn_bytes(const struct shape *s, enum ak_dtype dt)
{
	return 4.0 * (double)bhsd_rows(s) * BH_D(s) * esize(dt);
}

/* causal: half of q k^T and p v, 4 B H S S D together */
static double attn_flops(const struct shape *s)
{
	return 2.0 * (double)bhsd_rows(s) * BH_S(s) * BH_D(s);
}

/* Query row (b,h,s) reads its q row and the keys and values 0..s of its
 * head (causal). */
static void attn_deps(const struct shape *s, int64_t r, int64_t *lo,
		      int64_t *n)
{
	int64_t D = BH_D(s), t = r % BH_S(s);

	lo[0] = r * D;
	n[0] = D;
	lo[1] = lo[2] = (r - t) * D;
	n[1] = n[2] = (t + 1) * D;
}

static const struct op op_flash_attention = {
	.name = "flash_attention",
	.summary = "causal scaled dot-product attention",
	.dims = "B,H,S,D",
	.n_dims = 4,
	.n_in = 3,
	.n_out = 1,
	.in_names = { "q", "k", "v" },
	.in_desc = { "q[B,H,S,D]", "k[B,H,S,D]", "v[B,H,S,D]" },
	.out_desc = "o[B,H,S,D] = softmax(scale q k^T, keys j <= i) v",
	.scalar_desc = "scalar[0]=scale=D^-0.5",
	.compute_bound = 1,
	.smoke_shape = "1x2x16x16",
	/* 1x3x200x128: head dim 128's 128-row tiles cut by S (the last
	 * query tile's second half past the end); 2x2x17x128: one tile,
	 * mostly past S; 2x40x256x128: 160 query tiles of 128 rows, more
	 * than an H100's or H200's 132 SMs (a kernel with a block an SM
	 * takes two in some blocks) */
	.test_shapes = { "1x4x128x64", "1x4x512x64", "1x2x1024x64",
			 "1x2x256x128", "1x3x200x128", "2x40x256x128", "2x8x64x32",
			 NULL },
	.edge_shapes = { "1x1x1x1", "1x1x1x16", "1x3x7x5", "2x3x17x24",
			 "1x2x127x80", "1x1x129x64", "1x1x33x96", "2x2x17x128",
			 NULL },
	.bench_shape = "2x32x1024x64",
	.host_bench_shape = "1x8x256x64",
	.stability = 1u << GEN_LARGE | 1u << GEN_MIXED | 1u << GEN_ZERO,
	.tol = { { 3e-3, 2e-3 }, { 2.4e-2, 1.6e-2 }, { 2e-4, 2e-4 } },
	.tol_why = "atol in units of sqrt(sum p^2 |v|^2/D), the spread of "
		   "o: P may be rounded to the dtype before P V (~6u at the "
		   "tail); rtol ~4u; f32: scores of 250 carry ~1e-4 error",
	.tensors = attn_tensors,
	.scalars = attn_scalars,
	.generate = attn_generate,
	.rows = bhsd_rows,
	.row_len = bhsd_row_len,
	.row_deps = attn_deps,
	.reference = attn_reference,
	.row_scale = attn_row_scale,
	.bytes = attn_bytes,
	.flops = attn_flops,
};

/* ---- fused_mlp: y = (silu(x w_gate^T) * x w_up^T) w_down^T ---- */

#define MLP_T(s) ((s)->d[0])
#define MLP_D(s) ((s)->d[1])
#define MLP_F(s) ((s)->d[2])

static void mlp_tensors(const struct shape *s, enum ak_dtype dt,
			struct ak_tensor *in, struct ak_tensor *out)
{
	const int64_t td[2] = { MLP_T(s), MLP_D(s) };
	const int64_t fd[2] = { MLP_F(s), MLP_D(s) };
	const int64_t df[2] = { MLP_D(s), MLP_F(s) };

	dense(&in[0], dt, 2, td);
	dense(&in[1], dt, 2, fd);
	dense(&in[2], dt, 2, fd);
	dense(&in[3], dt, 2, df);
	dense(&out[0], dt, 2, td);
}

/*
 * y grows as x^2: x16 keeps the hidden row (~256 x^2) inside f16, and a
 * floor of 0.1 keeps it out of f16's subnormals where a kernel rounds it.
 */
static void mlp_generate(const struct shape *s, struct ak_tensor *in,
			 uint64_t seed, enum gen_kind kind)
{
	struct stab p = stab_of(16.0, 0.1);

	fill_main(&in[0], seed, kind, &p);
	/* 1/sqrt(fan_in) keeps every stage O(1) */
	fill(&in[1], seed, 1, kind, 0.0, 1.0 / sqrt((double)MLP_D(s)));
	fill(&in[2], seed, 2, kind, 0.0, 1.0 / sqrt((double)MLP_D(s)));
	fill(&in[3], seed, 3, kind, 0.0, 1.0 / sqrt((double)MLP_F(s)));
}

static int64_t mlp_rows(const struct shape *s)
{
	return MLP_T(s);
}

static int64_t mlp_row_len(const struct shape *s)
{
	return MLP_D(s);
}

static double silu(double z)
{
	return z / (1.0 + exp(-z));
}

static void mlp_reference(const struct shape *s, const struct ak_tensor *in,
			  const double scalar[4], int64_t t, double *ref)
{
	int64_t D = MLP_D(s), F = MLP_F(s), W = D > F ? D : F;
	double *x = scratch(D + W + F), *w, *h, g, u;

	(void)scalar;
	if (!x) {
		fail_row(ref, D);
		return;
	}
	w = x + D;
	h = w + W;
	load(&in[0], t * D, D, x);
	for (int64_t f = 0; f < F; f++) {
		load(&in[1], f * D, D, w);
		g = dot(x, w, D);
		load(&in[2], f * D, D, w);
		u = dot(x, w, D);
		h[f] = silu(g) * u;
	}
	for (int64_t d = 0; d < D; d++) {
		load(&in[3], d * F, F, w);
		ref[d] = dot(h, w, F);
	}
	free(x);
}

/* the hidden row, and so y, scales as mean(x^2) */
static double mlp_row_scale(const struct shape *s,
			    const struct ak_tensor *in,
			    const double scalar[4], int64_t t)
{
	int64_t D = MLP_D(s);

	(void)scalar;
	return sum_sq(&in[0], t * D, D) / (double)D;
}

static double mlp_bytes(const struct shape *s, enum ak_dtype dt)
{
	double T = MLP_T(s), D = MLP_D(s), F = MLP_F(s);

	return (2.0 * T * D + 3.0 * F * D) * esize(dt);
}

/* three T x D x F matmuls */
static double mlp_flops(const struct shape *s)
{
	return 6.0 * MLP_T(s) * MLP_D(s) * MLP_F(s);
}

/* The weights at 1/sqrt(fan in), rounded to a power of two: every
 * stage stays O(1). */
static void mlp_bench_gen(const struct shape *s, enum ak_dtype dt,
			  struct ak_gen *g)
{
	(void)dt;
	g[1].sd = g[2].sd = pow2_near(1.0 / sqrt((double)MLP_D(s)));
	g[3].sd = pow2_near(1.0 / sqrt((double)MLP_F(s)));
}

static void mlp_deps(const struct shape *s, int64_t r, int64_t *lo,
		     int64_t *n)
{
	lo[0] = r * MLP_D(s);
	n[0] = MLP_D(s);
}

static const struct op op_fused_mlp = {
	.name = "fused_mlp",
	.summary = "gated MLP (SwiGLU): three matmuls and a silu",
	.dims = "T,D,F",
	.n_dims = 3,
	.n_in = 4,
	.n_out = 1,
	.in_names = { "x", "w_gate", "w_up", "w_down" },
	.in_desc = { "x[T,D]", "w_gate[F,D]", "w_up[F,D]", "w_down[D,F]" },
	.out_desc = "y[T,D] = (silu(x w_gate^T) * x w_up^T) w_down^T",
	.scalar_desc = NULL,
	.compute_bound = 1,
	.smoke_shape = "4x16x32",
	.test_shapes = { "8x64x160", "64x256x704", "32x512x1376",
			 "16x1024x2816", "8x64x12288", NULL },
	.edge_shapes = { "1x1x1", "3x7x5", "17x33x65", "5x128x1",
			 "1x130x344", "7x1x9", NULL },
	.bench_shape = "2048x2048x5504",
	.host_bench_shape = "64x512x1376",
	.stability = 1u << GEN_LARGE | 1u << GEN_MIXED | 1u << GEN_ZERO,
	.tol = { { 4e-3, 2e-3 }, { 3e-2, 1.6e-2 }, { 1e-5, 1e-5 } },
	.tol_why = "atol in units of mean(x^2), y's scale: the gate, up "
		   "and hidden rows may each be rounded to the dtype (~8u "
		   "at the tail); rtol ~4u; f32 is f32 sums over D and F",
	.tensors = mlp_tensors,
	.scalars = no_scalars,
	.generate = mlp_generate,
	.rows = mlp_rows,
	.row_len = mlp_row_len,
	.bench_gen = mlp_bench_gen,
	.row_deps = mlp_deps,
	.reference = mlp_reference,
	.row_scale = mlp_row_scale,
	.bytes = mlp_bytes,
	.flops = mlp_flops,
};

/* ---- the registry ---- */

const struct op *const ops[] = {
	&op_matmul, &op_softmax, &op_layernorm, &op_rmsnorm,
	&op_cross_entropy, &op_reduce, &op_rotary, &op_flash_attention,
	&op_fused_mlp, NULL,
};

const struct op *op_find(const char *name)
{
	for (int i = 0; ops[i]; i++)
		if (!strcmp(ops[i]->name, name))
			return ops[i];
	return NULL;
}

double tolerance_bound(const struct tolerance *t, enum ak_dtype dt,
		       double ref, double scale)
{
	double step = dt == AK_F16 ? 0x1p-24 : 0x1p-126;

	return t->atol * scale + t->rtol * fabs(ref) + step;
}

double op_tolerance(const struct op *op, enum ak_dtype dt, double ref,
		    double scale)
{
	return tolerance_bound(&op->tol[dt <= AK_F32 ? dt : AK_F32], dt, ref,
			       scale);
}

/* ---- shapes ---- */

/* "R,C" -> "R x C" */
static void dims_pretty(const struct op *op, char *buf, size_t len)
{
	size_t o = 0;

	for (const char *p = op->dims; *p && o + 4 < len; p++) {
		if (*p == ',') {
			memcpy(buf + o, " x ", 3);
			o += 3;
		} else {
			buf[o++] = *p;
		}
	}
	buf[o] = '\0';
}

/* The i-th name of op->dims into buf. */
static void dim_name(const struct op *op, int i, char *buf, size_t len)
{
	const char *p = op->dims, *end;

	while (i-- > 0 && (p = strchr(p, ',')))
		p++;
	if (!p) {
		snprintf(buf, len, "?");
		return;
	}
	end = strchr(p, ',');
	snprintf(buf, len, "%.*s", (int)(end ? end - p : (int)strlen(p)), p);
}

static int bad_format(const struct op *op, const char *str, char *err,
		      size_t errlen)
{
	char want[64];

	dims_pretty(op, want, sizeof(want));
	snprintf(err, errlen, "%s takes %s, got '%s'", op->name, want, str);
	return -1;
}

static int all_digits(const char *p, size_t n)
{
	if (!n)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!isdigit((unsigned char)p[i]))
			return 0;
	return 1;
}

/* One dimension, str[0..n): 1 .. 2^40, or an error. */
static int parse_dim(const struct op *op, int i, const char *p, size_t n,
		     int64_t *out, char *err, size_t errlen)
{
	char name[16];
	int neg = n > 1 && p[0] == '-' && all_digits(p + 1, n - 1);
	int64_t v = 0;

	dim_name(op, i, name, sizeof(name));
	if (!neg && !all_digits(p, n))
		return 1;
	if (!neg && n <= 13) {
		for (size_t k = 0; k < n; k++)
			v = v * 10 + (p[k] - '0');
	}
	if (neg || (n <= 13 && v == 0)) {
		snprintf(err, errlen, "%s: %s must be positive, got '%.*s'",
			 op->name, name, (int)n, p);
		return -1;
	}
	if (n > 13 || v > (INT64_C(1) << 40)) {
		snprintf(err, errlen, "%s: %s is too large, got '%.*s'",
			 op->name, name, (int)n, p);
		return -1;
	}
	*out = v;
	return 0;
}

int shape_parse(struct shape *s, const struct op *op, const char *str,
		char *err, size_t errlen)
{
	const char *p = str, *x;
	double total = 1.0;
	const char *why;
	size_t n;
	int ret;

	memset(s, 0, sizeof(*s));
	if (!str)
		return bad_format(op, "", err, errlen);
	for (;;) {
		x = strchr(p, 'x');
		n = x ? (size_t)(x - p) : strlen(p);
		if (s->n == op->n_dims)
			return bad_format(op, str, err, errlen);
		ret = parse_dim(op, s->n, p, n, &s->d[s->n], err, errlen);
		if (ret > 0)
			return bad_format(op, str, err, errlen);
		if (ret < 0)
			return -1;
		total *= (double)s->d[s->n++];
		if (!x)
			break;
		p = x + 1;
	}
	if (s->n != op->n_dims)
		return bad_format(op, str, err, errlen);
	/* every element count and flop count must stay exact in int64 */
	if (total > 0x1p50) {
		snprintf(err, errlen, "%s: shape '%s' is too large",
			 op->name, str);
		return -1;
	}
	why = op->check_shape ? op->check_shape(s) : NULL;
	if (why) {
		snprintf(err, errlen, "%s: %s, got '%s'", op->name, why, str);
		return -1;
	}
	return 0;
}

void shape_format(const struct shape *s, char *buf, size_t len)
{
	size_t o = 0;
	int w;

	if (!len)
		return;
	buf[0] = '\0';
	for (int i = 0; i < s->n && o < len; i++) {
		w = snprintf(buf + o, len - o, "%s%lld", i ? "x" : "",
			     (long long)s->d[i]);
		if (w < 0)
			return;
		o += (size_t)w;
	}
}
