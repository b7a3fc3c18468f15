/*
 * unit-ops.c: TAP unit tests of ops/dtype.c and ops/ops.c.
 *
 * Besides conversions, shapes and hand-checked references, it holds one
 * small float kernel per op, written the way a correct kernel may be
 * (f32 accumulation, fast exp2 with log2e folded in, a reciprocal for the
 * mean, intermediates rounded to the dtype where doc/ops.md allows), and a
 * few with a real bug: the tolerances must pass the first at every default
 * shape and stability input, and fail the second.
 *
 * UNIT_OPS_FULL=1 in the environment runs the float kernels at every test
 * shape, and the finiteness checks in every dtype there (minutes); by
 * default the kernels run at the smaller shapes and the large ones check
 * f16 only.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ops/dtype.h"
#include "ops/ops.h"

static int n_tests, n_failed;

static int ok(int cond, const char *fmt, ...)
{
	va_list ap;

	n_tests++;
	if (!cond)
		n_failed++;
	printf("%s %d - ", cond ? "ok" : "not ok", n_tests);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	return cond;
}

static const enum ak_dtype dtypes[] = { AK_F16, AK_BF16, AK_F32 };

/* ---- conversions ---- */

static int is_f16_nan(uint16_t h)
{
	return (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
}

static void test_f16_rounding(void)
{
	ok(f32_to_f16(1.0f + 0x1p-11f) == 0x3c00,
	   "f16: 1+2^-11 ties to even 1");
	ok(f32_to_f16(1.0f + 3 * 0x1p-11f) == 0x3c02,
	   "f16: 1+3*2^-11 ties to even 1+2^-9");
	ok(f32_to_f16(1.0f + 0x1p-11f + 0x1p-20f) == 0x3c01,
	   "f16: just above a tie rounds up");
	ok(f32_to_f16(-1.0f - 0x1p-11f) == 0xbc00, "f16: negative tie");
	ok(f32_to_f16(0x1p-24f) == 0x0001, "f16: smallest subnormal");
	ok(f32_to_f16(0x1p-25f) == 0x0000, "f16: half of it ties to 0");
	ok(f32_to_f16(0x1.8p-25f) == 0x0001, "f16: 0.75 of it rounds up");
	ok(f32_to_f16(3 * 0x1p-25f) == 0x0002, "f16: subnormal tie to even");
	ok(f32_to_f16(0x1p-14f - 0x1p-25f) == 0x0400,
	   "f16: largest subnormal tie carries into the smallest normal");
	ok(f32_to_f16(0x1p-30f) == 0x0000 && f32_to_f16(-0x1p-30f) == 0x8000,
	   "f16: underflow keeps the sign");
	ok(f32_to_f16(65504.0f) == 0x7bff && f32_to_f16(65519.0f) == 0x7bff,
	   "f16: 65504 and 65519 round to the largest finite");
	ok(f32_to_f16(65520.0f) == 0x7c00 && f32_to_f16(1e6f) == 0x7c00,
	   "f16: 65520 and beyond overflow to inf");
	ok(f32_to_f16(-INFINITY) == 0xfc00, "f16: -inf");
	ok(is_f16_nan(f32_to_f16(NAN)) && (f32_to_f16(NAN) & 0x200),
	   "f16: NaN stays a quiet NaN");
	ok(is_f16_nan(f32_to_f16(bf16_to_f32(0x7f81))) &&
	   (f32_to_f16(bf16_to_f32(0x7f81)) & 0x200),
	   "f16: a signaling NaN becomes quiet");
	/* the float rounding of 1+2^-11+2^-40 is the tie 1+2^-11 */
	{
		uint16_t h;

		dtype_store(AK_F16, &h, 0, 1.0 + 0x1p-11 + 0x1p-40);
		ok(h == 0x3c01, "f16: a double just above a tie is not "
		   "double-rounded");
		dtype_store(AK_BF16, &h, 0, 1.0 + 0x1p-8 + 0x1p-40);
		ok(h == 0x3f81, "bf16: a double just above a tie is not "
		   "double-rounded");
	}
}

static void test_bf16_rounding(void)
{
	ok(f32_to_bf16(1.0f + 0x1p-8f) == 0x3f80,
	   "bf16: 1+2^-8 ties to even 1");
	ok(f32_to_bf16(1.0f + 3 * 0x1p-8f) == 0x3f82,
	   "bf16: 1+3*2^-8 ties to even 1+2^-6");
	ok(f32_to_bf16(0x1p-133f) == 0x0001, "bf16: smallest subnormal");
	ok(f32_to_bf16(3.3895314e38f) == 0x7f7f, "bf16: largest finite");
	ok(f32_to_bf16(3.4e38f) == 0x7f80, "bf16: overflow to inf");
	ok((f32_to_bf16(NAN) & 0x7fc0) == 0x7fc0, "bf16: NaN stays quiet");
	ok(bf16_to_f32(0x3f80) == 1.0f && bf16_to_f32(0xc000) == -2.0f,
	   "bf16: decode");
}

/* Is h the nearest f16 to x, ties to even? */
static int f16_is_nearest(float x, uint16_t h)
{
	double v = f16_to_f32(h), d = fabs((double)x - v);
	uint16_t nb[2] = { (uint16_t)(h - 1), (uint16_t)(h + 1) };

	if (isinf(v))
		return fabs(x) >= 65520.0;
	for (int i = 0; i < 2; i++) {
		double w, e;

		if ((nb[i] & 0x7fff) >= 0x7c00 || (nb[i] ^ h) & 0x8000)
			continue;
		w = f16_to_f32(nb[i]);
		e = fabs((double)x - w);
		if (e < d || (e == d && (h & 1)))
			return 0;
	}
	return 1;
}

static void test_round_trips(void)
{
	int bad = 0, bad_store = 0, bad_bf = 0, bad_near = 0;
	struct rng r;

	dtype_init();
	for (uint32_t i = 0; i < 65536; i++) {
		uint16_t h = (uint16_t)i, back;
		float f = f16_to_f32(h);
		double d;

		back = f32_to_f16(f);
		if (is_f16_nan(h) ? !is_f16_nan(back) : back != h)
			bad++;
		d = dtype_load(AK_F16, &h, 0);
		dtype_store(AK_F16, &back, 0, d);
		if (!is_f16_nan(h) && back != h)
			bad_store++;
		f = bf16_to_f32(h);
		back = f32_to_bf16(f);
		if (isnan(f) ? !isnan(bf16_to_f32(back)) : back != h)
			bad_bf++;
	}
	ok(!bad, "all 65536 f16 patterns round-trip through f32 (%d bad)",
	   bad);
	ok(!bad_store, "all f16 patterns round-trip through dtype_store "
	   "(%d bad)", bad_store);
	ok(!bad_bf, "all 65536 bf16 patterns round-trip (%d bad)", bad_bf);
	rng_seed(&r, 7);
	for (int i = 0; i < 1000000; i++) {
		float x = (float)(ldexp(2 * rng_uniform(&r) - 1,
					(int)(rng_uniform(&r) * 46) - 28));

		if (!f16_is_nearest(x, f32_to_f16(x)))
			bad_near++;
	}
	ok(!bad_near, "1e6 random floats round to the nearest f16 (%d bad)",
	   bad_near);
}

static void test_dtype_misc(void)
{
	enum ak_dtype t;
	int32_t i32;
	int64_t i64;

	ok(dtype_size(AK_F16) == 2 && dtype_size(AK_BF16) == 2 &&
	   dtype_size(AK_F32) == 4 && dtype_size(AK_I64) == 8,
	   "dtype_size");
	ok(!dtype_parse("bf16", &t) && t == AK_BF16 &&
	   !strcmp(dtype_name(AK_F16), "f16") && dtype_parse("f17", &t) < 0,
	   "dtype_parse and dtype_name");
	dtype_store(AK_I32, &i32, 0, -2.7);
	dtype_store(AK_I64, &i64, 0, 1e30);
	ok(i32 == -2 && i64 == INT64_MAX, "integers truncate and saturate");
	ok(dtype_max(AK_F16) == 65504.0, "dtype_max f16");
}

/* ---- shapes ---- */

static void test_shapes(void)
{
	const struct op *sm = op_find("softmax"), *mm = op_find("matmul");
	const struct op *rot = op_find("rotary_embedding");
	struct shape s;
	char err[128], buf[64];
	static const char *const bad[] = {
		"", "4096", "1x2x3", "12x", "x12", "ax4", "4x4 ", " 4x4",
		"4xx4", "4x+4", "4x0x", NULL,
	};
	int all_bad = 1;

	ok(sm && mm && rot && !op_find("nope"), "op_find");
	ok(!shape_parse(&s, sm, "4096x4096", err, sizeof(err)) &&
	   s.n == 2 && s.d[0] == 4096 && s.d[1] == 4096, "parse 4096x4096");
	ok(!shape_parse(&s, mm, "2x3x4", err, sizeof(err)) && s.n == 3 &&
	   s.d[0] == 2 && s.d[1] == 3 && s.d[2] == 4, "parse 2x3x4");
	shape_format(&s, buf, sizeof(buf));
	ok(!strcmp(buf, "2x3x4"), "format 2x3x4");
	shape_format(&s, buf, 4);
	ok(strlen(buf) < 4, "format truncates safely");
	shape_parse(&s, sm, "12x", err, sizeof(err));
	ok(!strcmp(err, "softmax takes R x C, got '12x'"), "message: %s", err);
	for (int i = 0; bad[i]; i++)
		if (!shape_parse(&s, sm, bad[i], err, sizeof(err)))
			all_bad = 0;
	ok(all_bad, "malformed shapes are rejected");
	ok(shape_parse(&s, sm, "0x5", err, sizeof(err)) < 0 &&
	   !strcmp(err, "softmax: R must be positive, got '0'"),
	   "zero: %s", err);
	ok(shape_parse(&s, sm, "4x-3", err, sizeof(err)) < 0 &&
	   !strcmp(err, "softmax: C must be positive, got '-3'"),
	   "negative: %s", err);
	ok(shape_parse(&s, sm, "99999999999999999999x2", err,
		       sizeof(err)) < 0 && strstr(err, "too large"),
	   "overflow: %s", err);
	ok(shape_parse(&s, mm, "1048576x1048576x1048576", err,
		       sizeof(err)) < 0 && strstr(err, "too large"),
	   "product overflow: %s", err);
	ok(shape_parse(&s, rot, "2x2x2x7", err, sizeof(err)) < 0 &&
	   !strcmp(err, "rotary_embedding: D must be even, got '2x2x2x7'"),
	   "rotary odd D: %s", err);
	ok(!shape_parse(&s, rot, "2x32x1024x128", err, sizeof(err)),
	   "rotary bench shape");
}

/* Every default shape of every op parses. */
static void test_default_shapes(void)
{
	struct shape s;
	char err[128];
	int bad = 0, n = 0;

	for (int i = 0; ops[i]; i++) {
		const struct op *op = ops[i];
		const char *one[] = { op->smoke_shape, op->bench_shape,
				      op->host_bench_shape };

		for (int k = 0; k < 3; k++, n++)
			bad += shape_parse(&s, op, one[k], err, 128) < 0;
		for (int k = 0; op->test_shapes[k]; k++, n++)
			bad += shape_parse(&s, op, op->test_shapes[k],
					   err, 128) < 0;
		for (int k = 0; op->edge_shapes[k]; k++, n++)
			bad += shape_parse(&s, op, op->edge_shapes[k],
					   err, 128) < 0;
	}
	ok(!bad, "all %d default shapes parse", n);
}

/* ---- tensors ---- */

static int dense_ok(const struct ak_tensor *t)
{
	int64_t st = 1;

	if (t->data)
		return 0;
	for (int i = t->ndim - 1; i >= 0; i--) {
		if (t->stride[i] != st || t->shape[i] <= 0)
			return 0;
		st *= t->shape[i];
	}
	for (int i = t->ndim; i < 4; i++)
		if (t->shape[i] || t->stride[i])
			return 0;
	return 1;
}

static void get(const struct op *op, const char *str, struct shape *s)
{
	char err[128];

	if (shape_parse(s, op, str, err, sizeof(err)) < 0) {
		printf("# %s\n", err);
		exit(1);
	}
}

static void test_tensors(void)
{
	static const char *const expect[] = {
		"matmul", "softmax", "layernorm", "rmsnorm", "cross_entropy",
		"reduce", "rotary_embedding", "flash_attention", "fused_mlp",
	};
	struct ak_tensor in[AK_OP_MAX_IN], out[AK_OP_MAX_OUT];
	struct shape s;
	int order = 1;

	for (int i = 0; i < 9; i++)
		order &= ops[i] && !strcmp(ops[i]->name, expect[i]);
	ok(order && !ops[9], "ops[] holds the nine ops in the order of doc/ops.md");
	for (int i = 0; ops[i]; i++) {
		const struct op *op = ops[i];
		int good = 1;

		get(op, op->bench_shape, &s);
		memset(in, 0x55, sizeof(in));
		memset(out, 0x55, sizeof(out));
		op_tensors(op, &s, AK_BF16, in, out);
		for (int k = 0; k < op->n_in; k++)
			good &= dense_ok(&in[k]);
		good &= dense_ok(&out[0]);
		good &= ak_numel(&out[0]) == op_rows(op, &s) *
			op_row_len(op, &s);
		good &= op->n_out == 1 && op->in_names[op->n_in - 1] &&
			op->in_desc[op->n_in - 1];
		ok(good, "%s: tensors dense, output = rows x row_len",
		   op->name);
	}
	get(op_find("cross_entropy"), "8x100", &s);
	op_tensors(op_find("cross_entropy"), &s, AK_F16, in, out);
	ok(in[0].dtype == AK_F16 && in[1].dtype == AK_I64 &&
	   in[1].ndim == 1 && in[1].shape[0] == 8 && out[0].dtype == AK_F32 &&
	   out[0].ndim == 0, "cross_entropy: i64 targets, f32 scalar loss");
	get(op_find("rotary_embedding"), "2x3x5x8", &s);
	op_tensors(op_find("rotary_embedding"), &s, AK_F32, in, out);
	ok(in[1].ndim == 2 && in[1].shape[0] == 5 && in[1].shape[1] == 4 &&
	   out[0].ndim == 4 && out[0].stride[0] == 3 * 5 * 8,
	   "rotary: cos[S,D/2], y[B,H,S,D]");
	get(op_find("fused_mlp"), "2x3x5", &s);
	op_tensors(op_find("fused_mlp"), &s, AK_F32, in, out);
	ok(in[1].shape[0] == 5 && in[1].shape[1] == 3 &&
	   in[3].shape[0] == 3 && in[3].shape[1] == 5 &&
	   out[0].shape[0] == 2 && out[0].shape[1] == 3,
	   "fused_mlp: w_gate[F,D], w_down[D,F], y[T,D]");
}

/* ---- problems: allocated tensors with generated inputs ---- */

struct problem {
	const struct op *op;
	struct shape s;
	enum ak_dtype dt;
	enum gen_kind g;
	struct ak_tensor in[AK_OP_MAX_IN], out[AK_OP_MAX_OUT];
	double scalar[4];
};

static void problem_init(struct problem *p, const struct op *op,
			 const char *shape, enum ak_dtype dt, uint64_t seed,
			 enum gen_kind kind)
{
	memset(p, 0, sizeof(*p));
	p->op = op;
	p->dt = dt;
	p->g = kind;
	get(op, shape, &p->s);
	op_tensors(op, &p->s, dt, p->in, p->out);
	for (int i = 0; i < op->n_in; i++)
		p->in[i].data = calloc((size_t)ak_numel(&p->in[i]),
				       dtype_size(p->in[i].dtype));
	p->out[0].data = calloc((size_t)ak_numel(&p->out[0]),
				dtype_size(p->out[0].dtype));
	op->scalars(&p->s, p->scalar);
	op->generate(&p->s, p->in, seed, kind);
}

static void problem_release(struct problem *p)
{
	for (int i = 0; i < p->op->n_in; i++)
		free(p->in[i].data);
	free(p->out[0].data);
}

static void set(struct ak_tensor *t, int64_t i, double v)
{
	dtype_store(t->dtype, t->data, i, v);
}

static double row_ref(struct problem *p, int64_t r, int64_t k)
{
	double ref[64];

	p->op->reference(&p->s, p->in, p->scalar, r, ref);
	return ref[k];
}

static int near(double a, double b, double tol)
{
	return fabs(a - b) <= tol;
}

/* ---- hand-checked references ---- */

static void test_ref_matmul_softmax(void)
{
	struct problem p;
	double ref[2];

	problem_init(&p, op_find("matmul"), "2x2x2", AK_F32, 1, GEN_NORMAL);
	set(&p.in[0], 0, 1); set(&p.in[0], 1, 2);
	set(&p.in[0], 2, 3); set(&p.in[0], 3, 4);
	set(&p.in[1], 0, 5); set(&p.in[1], 1, 6);
	set(&p.in[1], 2, 7); set(&p.in[1], 3, 8);
	p.op->reference(&p.s, p.in, p.scalar, 1, ref);
	ok(ref[0] == 43 && ref[1] == 50, "matmul 2x2: row 1 = [43, 50]");
	problem_release(&p);

	problem_init(&p, op_find("softmax"), "1x2", AK_F32, 1, GEN_NORMAL);
	set(&p.in[0], 0, 0);
	set(&p.in[0], 1, log(3.0));
	p.op->reference(&p.s, p.in, p.scalar, 0, ref);
	ok(near(ref[0], 0.25, 1e-7) && near(ref[1], 0.75, 1e-7),
	   "softmax of [0, ln 3] = [.25, .75]");
	problem_release(&p);
}

static void test_ref_norms(void)
{
	struct problem p;
	double ref[2], want = 3.0 / sqrt(12.5 + 1e-6);

	problem_init(&p, op_find("rmsnorm"), "1x2", AK_F32, 1, GEN_NORMAL);
	set(&p.in[0], 0, 3); set(&p.in[0], 1, 4);
	set(&p.in[1], 0, 1); set(&p.in[1], 1, 1);
	p.op->reference(&p.s, p.in, p.scalar, 0, ref);
	ok(p.scalar[0] == 1e-6 && near(ref[0], want, 1e-12) &&
	   near(ref[1], want * 4 / 3, 1e-12),
	   "rmsnorm of [3,4], w=1 = x/sqrt(12.5+eps)");
	problem_release(&p);

	problem_init(&p, op_find("layernorm"), "1x2", AK_F32, 1, GEN_NORMAL);
	set(&p.in[0], 0, 1); set(&p.in[0], 1, 3);
	set(&p.in[1], 0, 2); set(&p.in[1], 1, 2);
	set(&p.in[2], 0, 0.5); set(&p.in[2], 1, 0.5);
	p.op->reference(&p.s, p.in, p.scalar, 0, ref);
	want = 2.0 / sqrt(1.0 + 1e-5);
	ok(p.scalar[0] == 1e-5 && near(ref[0], 0.5 - want, 1e-12) &&
	   near(ref[1], 0.5 + want, 1e-12),
	   "layernorm of [1,3], w=2, b=.5 = .5 -+ 2/sqrt(1+eps)");
	problem_release(&p);
}

static void test_ref_ce_reduce(void)
{
	struct problem p;
	double ref[1];

	problem_init(&p, op_find("cross_entropy"), "3x10", AK_F32, 1,
		     GEN_EQUAL);
	p.op->reference(&p.s, p.in, p.scalar, 0, ref);
	ok(near(ref[0], log(10.0), 1e-12), "cross_entropy of equal logits "
	   "= ln V");
	set(&p.in[0], 0, 5.0);          /* row 0: target 0 or not */
	dtype_store(AK_I64, p.in[1].data, 0, 0);
	p.op->reference(&p.s, p.in, p.scalar, 0, ref);
	ok(near(ref[0], (2 * log(10.0) + log(exp(5.0) + 9 * exp(1.5)) -
			 5.0) / 3,
		1e-12), "cross_entropy: mean over rows, target picked");
	problem_release(&p);

	problem_init(&p, op_find("reduce"), "2x3", AK_F32, 1, GEN_NORMAL);
	for (int i = 0; i < 6; i++)
		set(&p.in[0], i, i + 1);
	p.op->reference(&p.s, p.in, p.scalar, 1, ref);
	ok(ref[0] == 15 && op_rows(p.op, &p.s) == 2 &&
	   op_row_len(p.op, &p.s) == 1, "reduce of [4,5,6] = 15");
	problem_release(&p);
}

static void test_ref_rotary(void)
{
	struct problem p;
	int same = 1;

	problem_init(&p, op_find("rotary_embedding"), "1x2x3x4", AK_F32, 9,
		     GEN_NORMAL);
	for (int64_t i = 0; i < 6; i++) {
		set(&p.in[1], i, 1);
		set(&p.in[2], i, 0);
	}
	for (int64_t r = 0; r < 6; r++)
		for (int64_t k = 0; k < 4; k++)
			same &= row_ref(&p, r, k) ==
				dtype_load(AK_F32, p.in[0].data, r * 4 + k);
	ok(same, "rotary with cos=1, sin=0 is the identity");
	set(&p.in[1], 4, 0);            /* s = 2, i = 0: a quarter turn */
	set(&p.in[2], 4, 1);
	ok(row_ref(&p, 2, 0) == -dtype_load(AK_F32, p.in[0].data, 9) &&
	   row_ref(&p, 2, 1) == dtype_load(AK_F32, p.in[0].data, 8),
	   "rotary with sin=1 maps (a, b) to (-b, a)");
	p.scalar[0] = ROTARY_HALF;      /* half-split: x[i] with x[i+D/2] */
	ok(row_ref(&p, 2, 0) == -dtype_load(AK_F32, p.in[0].data, 10) &&
	   row_ref(&p, 2, 2) == dtype_load(AK_F32, p.in[0].data, 8) &&
	   row_ref(&p, 2, 1) == dtype_load(AK_F32, p.in[0].data, 9),
	   "rotary, half-split: sin=1 maps (x0, x2) to (-x2, x0), x1 stays");
	p.scalar[0] = 7;
	p.op->scalars(&p.s, p.scalar);
	ok(p.scalar[0] == ROTARY_INTERLEAVED, "rotary: no such layout is 0");
	problem_release(&p);
	problem_init(&p, op_find("rotary_embedding"), "1x1x64x8", AK_F32, 9,
		     GEN_NORMAL);
	same = 1;
	for (int64_t i = 0; i < 64 * 4; i++) {
		double c = dtype_load(AK_F32, p.in[1].data, i);
		double s = dtype_load(AK_F32, p.in[2].data, i);

		same &= near(c * c + s * s, 1.0, 1e-6);
	}
	ok(same, "rotary: generated cos^2 + sin^2 = 1");
	problem_release(&p);
}

static void test_ref_attention(void)
{
	struct problem p;
	int good = 1;
	double v0, v1, a, w;

	problem_init(&p, op_find("flash_attention"), "1x2x5x4", AK_F32, 3,
		     GEN_NORMAL);
	ok(p.scalar[0] == 0.5, "flash: scale = 1/sqrt(D)");
	for (int64_t h = 0; h < 2; h++)
		for (int64_t k = 0; k < 4; k++)
			good &= row_ref(&p, h * 5, k) ==
				dtype_load(AK_F32, p.in[2].data, h * 20 + k);
	ok(good, "causal attention: row 0 of each head = v row 0");
	/* row 1 of head 0 by hand: two keys */
	a = 0.0;
	w = 0.0;
	for (int64_t k = 0; k < 4; k++) {
		a += dtype_load(AK_F32, p.in[0].data, 4 + k) *
		     dtype_load(AK_F32, p.in[1].data, k);
		w += dtype_load(AK_F32, p.in[0].data, 4 + k) *
		     dtype_load(AK_F32, p.in[1].data, 4 + k);
	}
	a = exp(0.5 * a);
	w = exp(0.5 * w);
	v0 = dtype_load(AK_F32, p.in[2].data, 2);
	v1 = dtype_load(AK_F32, p.in[2].data, 6);
	ok(near(row_ref(&p, 1, 2), (a * v0 + w * v1) / (a + w), 1e-12),
	   "causal attention: row 1 mixes keys 0 and 1 only");
	problem_release(&p);
}

static void test_ref_mlp(void)
{
	struct problem p;
	double ref[1], g = 0.5, u = 2.0;

	problem_init(&p, op_find("fused_mlp"), "1x1x1", AK_F32, 3,
		     GEN_NORMAL);
	set(&p.in[0], 0, 1.0);
	set(&p.in[1], 0, g);
	set(&p.in[2], 0, u);
	set(&p.in[3], 0, 3.0);
	p.op->reference(&p.s, p.in, p.scalar, 0, ref);
	ok(near(ref[0], 3.0 * u * g / (1 + exp(-g)), 1e-12),
	   "fused_mlp 1x1x1 = w_down silu(g) u");
	problem_release(&p);
}

/* ---- generation ---- */

static int same_inputs(const struct problem *a, const struct problem *b)
{
	for (int i = 0; i < a->op->n_in; i++)
		if (memcmp(a->in[i].data, b->in[i].data,
			   (size_t)ak_numel(&a->in[i]) *
			   dtype_size(a->in[i].dtype)))
			return 0;
	return 1;
}

static void test_determinism(void)
{
	for (int i = 0; ops[i]; i++) {
		struct problem a, b, c;

		problem_init(&a, ops[i], ops[i]->smoke_shape, AK_BF16, 42,
			     GEN_NORMAL);
		problem_init(&b, ops[i], ops[i]->smoke_shape, AK_BF16, 42,
			     GEN_NORMAL);
		problem_init(&c, ops[i], ops[i]->smoke_shape, AK_BF16, 43,
			     GEN_NORMAL);
		ok(same_inputs(&a, &b) && !same_inputs(&a, &c),
		   "%s: same seed same inputs, another seed others",
		   ops[i]->name);
		problem_release(&a);
		problem_release(&b);
		problem_release(&c);
	}
}

static void test_rng(void)
{
	struct rng r;
	double s = 0, s2 = 0, x;
	int n = 200000;

	rng_seed(&r, 1);
	for (int i = 0; i < n; i++) {
		x = rng_normal(&r);
		s += x;
		s2 += x * x;
	}
	ok(fabs(s / n) < 0.01 && fabs(s2 / n - 1) < 0.01,
	   "rng_normal has mean 0, variance 1");
}

/* Inputs finite; sampled reference rows finite and representable. */
static int finite_problem(struct problem *p, int64_t max_rows)
{
	int64_t rows = op_rows(p->op, &p->s), len = op_row_len(p->op, &p->s);
	int64_t step = rows > max_rows ? rows / max_rows : 1;
	double lim = dtype_max(p->out[0].dtype), *ref = malloc(
		(size_t)len * sizeof(double));
	int good = 1;

	for (int i = 0; i < p->op->n_in; i++)
		for (int64_t k = 0; k < ak_numel(&p->in[i]); k++) {
			double v = dtype_load(p->in[i].dtype, p->in[i].data, k);

			/* a mask's -inf is the point of GEN_MASKED */
			if (p->g == GEN_MASKED && i == 0 && v == -INFINITY)
				continue;
			good &= fabs(v) <= dtype_max(p->in[i].dtype);
		}
	for (int64_t r = 0; r < rows && good; r += step) {
		p->op->reference(&p->s, p->in, p->scalar, r, ref);
		for (int64_t k = 0; k < len; k++)
			good &= fabs(ref[k]) <= lim;
		good &= isfinite(op_row_scale(p->op, &p->s, p->in,
					      p->scalar, r));
	}
	free(ref);
	return good;
}

/* Elements of all inputs of op at shape str. */
static double input_size(const struct op *op, const char *str)
{
	struct ak_tensor in[AK_OP_MAX_IN], out[AK_OP_MAX_OUT];
	struct shape s;
	double n = 0.0;

	get(op, str, &s);
	op_tensors(op, &s, AK_F32, in, out);
	for (int i = 0; i < op->n_in; i++)
		n += (double)ak_numel(&in[i]);
	return n;
}

/*
 * Every input kind at the smoke and test shapes.  f16 is the dtype whose
 * range the transforms can leave; by default the large test shapes run
 * only in f16, to keep the test quick.
 */
static void test_stability_finite(int full)
{
	for (int i = 0; ops[i]; i++) {
		const struct op *op = ops[i];
		int good = 1, n = 0;

		for (int k = -1; k < AK_OP_MAX_SHAPES; k++) {
			const char *sh = k < 0 ? op->smoke_shape :
				op->test_shapes[k];
			int nd;

			if (!sh)
				break;
			nd = full || input_size(op, sh) < 3e5 ? 3 : 1;
			for (int d = 0; d < nd; d++) {
				for (int g = 0; g < GEN_KINDS; g++) {
					struct problem p;

					if (g > GEN_UNIFORM &&
					    !(op->stability & 1u << g))
						continue;
					problem_init(&p, op, sh, dtypes[d],
						     5, (enum gen_kind)g);
					good &= finite_problem(&p, k < 0 ?
							       1 << 30 : 8);
					problem_release(&p);
					n++;
				}
			}
		}
		ok(good, "%s: inputs and reference finite and representable "
		   "(%d cases)", op->name, n);
	}
}

/*
 * GEN_MASKED: each row -inf up to a point that varies by row, its last
 * element never; cross_entropy's targets outside the mask.
 */
static void test_masked(void)
{
	struct problem p, q;
	int prefix = 1, whole = 0, varied = 0, target = 1;
	int64_t first = -1;

	problem_init(&p, op_find("softmax"), "64x4096", AK_F16, 3, GEN_MASKED);
	for (int64_t r = 0; r < 64; r++) {
		int64_t n = 0;

		while (n < 4096 && dtype_load(AK_F16, p.in[0].data,
					      r * 4096 + n) == -INFINITY)
			n++;
		for (int64_t c = n; c < 4096; c++)
			prefix &= isfinite(dtype_load(AK_F16, p.in[0].data,
						      r * 4096 + c));
		whole |= n == 4096;
		varied |= first >= 0 && n != first;
		first = first < 0 ? n : first;
	}
	ok(prefix && !whole && varied,
	   "masked: a -inf prefix a row, of varied length, never the row");
	problem_release(&p);

	problem_init(&q, op_find("cross_entropy"), "256x1000", AK_BF16, 3,
		     GEN_MASKED);
	for (int64_t r = 0; r < 256; r++) {
		int64_t t = ((const int64_t *)q.in[1].data)[r];

		target &= t >= 0 && t < 1000 && isfinite(dtype_load(
			AK_BF16, q.in[0].data, r * 1000 + t));
	}
	ok(target, "masked: cross_entropy's targets are logits left unmasked");
	problem_release(&q);
}

/* ---- bytes and flops ---- */

static double bench_bytes(const char *name, enum ak_dtype dt)
{
	const struct op *op = op_find(name);
	struct shape s;

	get(op, op->bench_shape, &s);
	return op->bytes(&s, dt);
}

static double bench_flops(const char *name)
{
	const struct op *op = op_find(name);
	struct shape s;

	get(op, op->bench_shape, &s);
	return op->flops(&s);
}

static void test_bytes_flops(void)
{
	ok(bench_bytes("softmax", AK_F16) == 67108864.0,
	   "softmax 4096x4096 f16 moves 64 MiB");
	ok(bench_bytes("matmul", AK_F16) == 3.0 * 2048 * 2048 * 2 &&
	   bench_flops("matmul") == 2.0 * 2048 * 2048 * 2048,
	   "matmul bytes and flops");
	ok(bench_bytes("reduce", AK_F32) == (8192.0 * 8192 + 8192) * 4,
	   "reduce bytes");
	ok(bench_bytes("cross_entropy", AK_BF16) ==
	   4096.0 * 32000 * 2 + 4096 * 8 + 4, "cross_entropy bytes");
	ok(bench_bytes("layernorm", AK_F16) ==
	   (2.0 * 4096 * 2048 + 2 * 2048) * 2, "layernorm bytes");
	ok(bench_bytes("rotary_embedding", AK_F16) ==
	   (2.0 * 2 * 32 * 1024 * 128 + 1024 * 128) * 2, "rotary bytes");
	ok(bench_bytes("flash_attention", AK_F16) ==
	   4.0 * 2 * 32 * 1024 * 64 * 2 &&
	   bench_flops("flash_attention") == 2.0 * 2 * 32 * 1024 * 1024 * 64,
	   "flash_attention bytes and causal flops");
	ok(bench_flops("fused_mlp") == 6.0 * 2048 * 2048 * 5504 &&
	   bench_bytes("fused_mlp", AK_F16) ==
	   (2.0 * 2048 * 2048 + 3.0 * 5504 * 2048) * 2,
	   "fused_mlp bytes and flops");
	for (int i = 0; ops[i]; i++) {
		int good = ops[i]->tol_why && ops[i]->summary;

		for (int d = 0; d < 3; d++)
			good &= ops[i]->tol[d].atol > 0 &&
				ops[i]->tol[d].rtol > 0;
		ok(good, "%s: tolerances for f16, bf16, f32 with a reason",
		   ops[i]->name);
	}
}

/* ---- float kernels: correct ones pass, buggy ones fail ---- */

typedef void kernel_fn(const struct problem *p, int bug);

static float ld(const struct ak_tensor *t, int64_t i)
{
	return (float)dtype_load(t->dtype, t->data, i);
}

static void st(const struct ak_tensor *t, int64_t i, float v)
{
	dtype_store(t->dtype, t->data, i, v);
}

/* What storing to the problem's dtype does to an f32 intermediate. */
static float rnd(enum ak_dtype dt, float v)
{
	if (dt == AK_F16)
		return f16_to_f32(f32_to_f16(v));
	if (dt == AK_BF16)
		return bf16_to_f32(f32_to_bf16(v));
	return v;
}

#define LOG2E 1.44269504f

/* exp2 with log2e folded into the inputs, as fast kernels do */
static void k_softmax(const struct problem *p, int bug)
{
	int64_t R = p->s.d[0], C = p->s.d[1];

	for (int64_t r = 0; r < R; r++) {
		float m = -INFINITY, l = 0.0f;

		for (int64_t c = 0; c < C; c++)
			m = fmaxf(m, ld(&p->in[0], r * C + c));
		if (bug)
			m = 0.0f;       /* no max subtraction */
		for (int64_t c = 0; c < C; c++)
			l += exp2f(ld(&p->in[0], r * C + c) * LOG2E -
				   m * LOG2E);
		for (int64_t c = 0; c < C; c++)
			st(&p->out[0], r * C + c,
			   exp2f(ld(&p->in[0], r * C + c) * LOG2E -
				 m * LOG2E) / l);
	}
}

/* mean by a reciprocal; bug: eps outside the square root */
static void k_layernorm(const struct problem *p, int bug)
{
	int64_t R = p->s.d[0], C = p->s.d[1];
	float eps = (float)p->scalar[0], inv = 1.0f / (float)C;

	for (int64_t r = 0; r < R; r++) {
		const struct ak_tensor *x = &p->in[0];
		float mean = 0.0f, var = 0.0f, rstd, d;

		for (int64_t c = 0; c < C; c++)
			mean += ld(x, r * C + c);
		mean *= inv;
		for (int64_t c = 0; c < C; c++) {
			d = ld(x, r * C + c) - mean;
			var += d * d;
		}
		var *= inv;
		rstd = bug ? 1.0f / (sqrtf(var) + eps) :
			1.0f / sqrtf(var + eps);
		for (int64_t c = 0; c < C; c++)
			st(&p->out[0], r * C + c,
			   (ld(x, r * C + c) - mean) * rstd *
			   ld(&p->in[1], c) + ld(&p->in[2], c));
	}
}

/* bug: no eps */
static void k_rmsnorm(const struct problem *p, int bug)
{
	int64_t R = p->s.d[0], C = p->s.d[1];

	for (int64_t r = 0; r < R; r++) {
		float ss = 0.0f, v, rstd;

		for (int64_t c = 0; c < C; c++) {
			v = ld(&p->in[0], r * C + c);
			ss += v * v;
		}
		rstd = 1.0f / sqrtf(ss / (float)C +
				    (bug ? 0.0f : (float)p->scalar[0]));
		for (int64_t c = 0; c < C; c++)
			st(&p->out[0], r * C + c, ld(&p->in[0], r * C + c) *
			   rstd * ld(&p->in[1], c));
	}
}

/* bug: the accumulator in the dtype */
static void k_reduce(const struct problem *p, int bug)
{
	int64_t R = p->s.d[0], C = p->s.d[1];

	for (int64_t r = 0; r < R; r++) {
		float acc = 0.0f;

		for (int64_t c = 0; c < C; c++) {
			acc += ld(&p->in[0], r * C + c);
			if (bug)
				acc = rnd(p->dt, acc);
		}
		st(&p->out[0], r, acc);
	}
}

/* i-k-j order, fma; bug: the last k dropped */
static void k_matmul(const struct problem *p, int bug)
{
	int64_t M = p->s.d[0], N = p->s.d[1], K = p->s.d[2];
	float *acc = malloc((size_t)N * sizeof(float));

	for (int64_t m = 0; m < M; m++) {
		memset(acc, 0, (size_t)N * sizeof(float));
		for (int64_t k = 0; k < K - (bug && K > 1); k++) {
			float a = ld(&p->in[0], m * K + k);

			for (int64_t n = 0; n < N; n++)
				acc[n] = fmaf(a, ld(&p->in[1], k * N + n),
					      acc[n]);
		}
		for (int64_t n = 0; n < N; n++)
			st(&p->out[0], m * N + n, acc[n]);
	}
	free(acc);
}

/* bug: a target off by one */
static void k_ce(const struct problem *p, int bug)
{
	int64_t N = p->s.d[0], V = p->s.d[1];
	float total = 0.0f;

	for (int64_t n = 0; n < N; n++) {
		float m = -INFINITY, l = 0.0f;
		int64_t t = ((const int64_t *)p->in[1].data)[n];

		if (bug)
			t = (t + 1) % V;
		for (int64_t v = 0; v < V; v++)
			m = fmaxf(m, ld(&p->in[0], n * V + v));
		for (int64_t v = 0; v < V; v++)
			l += exp2f((ld(&p->in[0], n * V + v) - m) * LOG2E);
		total += m + logf(l) - ld(&p->in[0], n * V + t);
	}
	st(&p->out[0], 0, total / (float)N);
}

/* bug: the angle of the next position */
static void k_rotary(const struct problem *p, int bug)
{
	int64_t S = p->s.d[2], D = p->s.d[3], rows = p->s.d[0] * p->s.d[1] * S;

	for (int64_t r = 0; r < rows; r++) {
		int64_t t = r % S;

		if (bug)
			t = (t + 1) % S;
		for (int64_t i = 0; i < D / 2; i++) {
			float a = ld(&p->in[0], r * D + 2 * i);
			float b = ld(&p->in[0], r * D + 2 * i + 1);
			float c = ld(&p->in[1], t * D / 2 + i);
			float s = ld(&p->in[2], t * D / 2 + i);

			st(&p->out[0], r * D + 2 * i, fmaf(a, c, -b * s));
			st(&p->out[0], r * D + 2 * i + 1, fmaf(a, s, b * c));
		}
	}
}

/*
 * Two passes per row, P rounded to the dtype before P V and the sum taken
 * before rounding, as flash attention kernels do; bug: the causal mask
 * one key too wide.
 */
static void k_attention(const struct problem *p, int bug)
{
	int64_t S = p->s.d[2], D = p->s.d[3], rows = p->s.d[0] * p->s.d[1] * S;
	float sc = (float)p->scalar[0] * LOG2E;
	float *w = malloc((size_t)S * sizeof(float));
	float *o = malloc((size_t)D * sizeof(float));

	for (int64_t r = 0; r < rows; r++) {
		int64_t i = r % S, base = (r - i) * D;
		int64_t n = bug && i + 1 < S ? i + 2 : i + 1;
		float m = -INFINITY, l = 0.0f;

		for (int64_t j = 0; j < n; j++) {
			float a = 0.0f;

			for (int64_t d = 0; d < D; d++)
				a = fmaf(ld(&p->in[0], r * D + d),
					 ld(&p->in[1], base + j * D + d), a);
			w[j] = a * sc;
			m = fmaxf(m, w[j]);
		}
		memset(o, 0, (size_t)D * sizeof(float));
		for (int64_t j = 0; j < n; j++) {
			float e = exp2f(w[j] - m);

			l += e;
			e = rnd(p->dt, e);
			for (int64_t d = 0; d < D; d++)
				o[d] = fmaf(e, ld(&p->in[2], base + j * D + d),
					    o[d]);
		}
		for (int64_t d = 0; d < D; d++)
			st(&p->out[0], r * D + d, o[d] / l);
	}
	free(w);
	free(o);
}

/* gate, up and hidden rounded to the dtype; bug: no silu */
static void k_mlp(const struct problem *p, int bug)
{
	int64_t T = p->s.d[0], D = p->s.d[1], F = p->s.d[2];
	float *h = malloc((size_t)F * sizeof(float));

	for (int64_t t = 0; t < T; t++) {
		for (int64_t f = 0; f < F; f++) {
			float g = 0.0f, u = 0.0f, x;

			for (int64_t d = 0; d < D; d++) {
				x = ld(&p->in[0], t * D + d);
				g = fmaf(x, ld(&p->in[1], f * D + d), g);
				u = fmaf(x, ld(&p->in[2], f * D + d), u);
			}
			g = rnd(p->dt, g);
			u = rnd(p->dt, u);
			h[f] = rnd(p->dt, (bug ? g : g / (1.0f + expf(-g))) *
				   u);
		}
		for (int64_t d = 0; d < D; d++) {
			float y = 0.0f;

			for (int64_t f = 0; f < F; f++)
				y = fmaf(h[f], ld(&p->in[3], d * F + f), y);
			st(&p->out[0], t * D + d, y);
		}
	}
	free(h);
}

/* Elements of the output outside tolerance; the worst ratio in *worst. */
static int64_t check(const struct problem *p, double *worst)
{
	int64_t rows = op_rows(p->op, &p->s), len = op_row_len(p->op, &p->s);
	double *ref = malloc((size_t)len * sizeof(double)), out, bound, sc;
	int64_t bad = 0;

	for (int64_t r = 0; r < rows; r++) {
		p->op->reference(&p->s, p->in, p->scalar, r, ref);
		sc = op_row_scale(p->op, &p->s, p->in, p->scalar, r);
		for (int64_t k = 0; k < len; k++) {
			out = dtype_load(p->out[0].dtype, p->out[0].data,
					 r * len + k);
			bound = op_tolerance(p->op, p->dt, ref[k], sc);
			if (!(fabs(out - ref[k]) <= bound))
				bad++;
			else if (fabs(out - ref[k]) / bound > *worst)
				*worst = fabs(out - ref[k]) / bound;
		}
	}
	free(ref);
	return bad;
}

static const struct {
	const char *op;
	kernel_fn *fn;
	enum gen_kind bug_kind;         /* where the bug shows */
	const char *bug_shape;
	enum ak_dtype bug_dt;
} kernels[] = {
	{ "matmul", k_matmul, GEN_NORMAL, "64x64x64", AK_F32 },
	{ "softmax", k_softmax, GEN_LARGE, "64x1000", AK_F32 },
	{ "layernorm", k_layernorm, GEN_TINY, "64x1000", AK_F32 },
	{ "rmsnorm", k_rmsnorm, GEN_ZERO, "64x1000", AK_F32 },
	{ "cross_entropy", k_ce, GEN_NORMAL, "256x1000", AK_F32 },
	{ "reduce", k_reduce, GEN_NORMAL, "64x4096", AK_F16 },
	{ "rotary_embedding", k_rotary, GEN_NORMAL, "1x2x64x32", AK_F32 },
	{ "flash_attention", k_attention, GEN_NORMAL, "1x2x64x32", AK_F32 },
	{ "fused_mlp", k_mlp, GEN_NORMAL, "4x64x160", AK_F32 },
};

/* Work of one run, to keep the default sweep quick. */
static double cost(const struct op *op, const char *str)
{
	struct shape s;
	double n = 1.0;

	get(op, str, &s);
	for (int i = 0; i < s.n; i++)
		n *= (double)s.d[i];
	if (!strcmp(op->name, "flash_attention"))
		n *= (double)s.d[2] / 2;
	return fmax(n, input_size(op, str));
}

static void sweep(int k, const char *sh, int full, int *runs,
		  int64_t *bad, double *worst, char *where, size_t wlen)
{
	const struct op *op = op_find(kernels[k].op);

	if (!full && cost(op, sh) > 3e5)
		return;
	for (int d = 0; d < 3; d++) {
		for (int g = 0; g < GEN_KINDS; g++) {
			struct problem p;
			int64_t b;

			if (g > GEN_UNIFORM && !(op->stability & 1u << g))
				continue;
			problem_init(&p, op, sh, dtypes[d], 11 + g,
				     (enum gen_kind)g);
			kernels[k].fn(&p, 0);
			b = check(&p, worst);
			if (b && !*bad)
				snprintf(where, wlen, "%s %s kind %d", sh,
					 dtype_name(dtypes[d]), g);
			*bad += b;
			(*runs)++;
			problem_release(&p);
		}
	}
}

static void test_kernels(int full)
{
	for (size_t k = 0; k < sizeof(kernels) / sizeof(kernels[0]); k++) {
		const struct op *op = op_find(kernels[k].op);
		int64_t bad = 0;
		double worst = 0.0;
		int runs = 0;
		char where[96] = "";
		struct problem p;

		for (int i = -1; i < AK_OP_MAX_SHAPES; i++) {
			const char *sh = i < 0 ? op->smoke_shape :
				op->test_shapes[i];

			if (!sh)
				break;
			sweep((int)k, sh, full, &runs, &bad, &worst, where,
			      sizeof(where));
		}
		for (int i = 0; op->edge_shapes[i]; i++)
			sweep((int)k, op->edge_shapes[i], full, &runs, &bad,
			      &worst, where, sizeof(where));
		ok(!bad, "%s: a correct f32-accumulating kernel passes "
		   "(%d runs, worst %.2f of tolerance) %s", op->name, runs,
		   worst, where);

		problem_init(&p, op, kernels[k].bug_shape, kernels[k].bug_dt,
			     3, kernels[k].bug_kind);
		kernels[k].fn(&p, 1);
		worst = 0.0;
		ok(check(&p, &worst) > 0, "%s: a kernel with a bug fails",
		   op->name);
		problem_release(&p);
	}
}

int main(void)
{
	const char *full = getenv("UNIT_OPS_FULL");

	dtype_init();
	test_f16_rounding();
	test_bf16_rounding();
	test_round_trips();
	test_dtype_misc();
	test_shapes();
	test_default_shapes();
	test_tensors();
	test_ref_matmul_softmax();
	test_ref_norms();
	test_ref_ce_reduce();
	test_ref_rotary();
	test_ref_attention();
	test_ref_mlp();
	test_rng();
	test_determinism();
	test_stability_finite(full && *full == '1');
	test_masked();
	test_bytes_flops();
	test_kernels(full && *full == '1');
	printf("1..%d\n", n_tests);
	return n_failed ? 1 : 0;
}
