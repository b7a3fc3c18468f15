/*
 * verify.c: the five stages and the benchmark.  Inputs are generated here
 * into the runner's shared mapping, the runner makes the call under its
 * integrity checks, and the outputs are compared here with the fp64
 * reference, row by row (every row, or a seeded sample of at least 64 when
 * the reference would take too long).
 */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dtype.h"
#include "verify.h"

void verify_set_threads(int n)
{
	omp_set_num_threads(n > 0 ? n : 1);
}

const char *const stage_names[5] = {
	"smoke", "shape sweep", "stability", "determinism", "edge cases",
};

static const char *const gen_names[GEN_KINDS] = {
	"normal", "uniform", "large", "tiny", "mixed-scale", "all-equal",
	"all-zero",
};

/* Reference work (flops) above which rows are sampled. */
#define REF_BUDGET 3e8
#define MIN_SAMPLE 64

struct layout {
	struct ak_tensor in[AK_OP_MAX_IN], out[AK_OP_MAX_OUT];
	size_t in_off[AK_OP_MAX_IN], out_off[AK_OP_MAX_OUT], size;
};

static size_t tensor_bytes(const struct ak_tensor *t)
{
	return (size_t)ak_numel(t) * dtype_size(t->dtype);
}

static size_t align_up(size_t n)
{
	return (n + 255) & ~(size_t)255;
}

/* The op's tensors at s, laid out in the shared mapping; extra_outs more
 * copies of the outputs follow (for the benchmark's other kernels). */
static void layout_make(struct layout *l, const struct problem *p,
			const struct shape *s, enum ak_dtype dt, int extra_outs)
{
	size_t off = 0;

	memset(l, 0, sizeof(*l));
	p->op->tensors(s, dt, l->in, l->out);
	for (int i = 0; i < p->op->n_in; i++) {
		l->in_off[i] = off;
		off = align_up(off + tensor_bytes(&l->in[i]));
	}
	for (int i = 0; i < p->op->n_out; i++) {
		l->out_off[i] = off;
		off = align_up(off + tensor_bytes(&l->out[i]) *
			       (size_t)(1 + extra_outs));
	}
	l->size = off ? off : 256;
}

static void layout_bind(struct layout *l, unsigned char *base)
{
	for (int i = 0; i < AK_OP_MAX_IN; i++)
		l->in[i].data = base + l->in_off[i];
	for (int i = 0; i < AK_OP_MAX_OUT; i++)
		l->out[i].data = base + l->out_off[i];
}

static json_t *tensor_json(const struct ak_tensor *t, size_t off, int out)
{
	json_t *shape = json_array();

	for (int d = 0; d < t->ndim; d++)
		json_array_append_new(shape, json_integer(t->shape[d]));
	return json_pack("{s:i,s:o,s:I,s:b}", "dtype", (int)t->dtype,
			 "shape", shape, "offset", (json_int_t)off, "out", out);
}

static json_t *layout_request(struct runner *r, const struct problem *p,
			      const struct layout *l, const struct shape *s,
			      const char *req)
{
	json_t *ts = json_array(), *sc = json_array();
	double scalar[4];

	for (int i = 0; i < p->op->n_in; i++)
		json_array_append_new(ts, tensor_json(&l->in[i], l->in_off[i], 0));
	for (int i = 0; i < p->op->n_out; i++)
		json_array_append_new(ts, tensor_json(&l->out[i], l->out_off[i], 1));
	/* Scalars follow the shape (the attention scale is D^-0.5). */
	memcpy(scalar, p->scalar, sizeof(scalar));
	p->op->scalars(s, scalar);
	for (int i = 0; i < 4; i++)
		json_array_append_new(sc, json_real(scalar[i]));
	return json_pack("{s:s,s:s,s:I,s:o,s:o}", "req", req, "shm",
			 r->shm_path, "size", (json_int_t)r->shm_size,
			 "tensors", ts, "scalar", sc);
}

/* ---- comparison with the reference ---- */

struct row_check {
	double worst_ratio, expected, actual, limit;
	int64_t worst_idx, bad;
	int unwritten, nan;
	double lo, hi, ref_lo, ref_hi;
};

static int is_poison(enum ak_dtype dt, const void *base, int64_t i)
{
	const unsigned char *b = (const unsigned char *)base +
		(size_t)i * dtype_size(dt);

	for (size_t k = 0; k < dtype_size(dt); k++)
		if (b[k] != 0xFF)
			return 0;
	return 1;
}

static void check_row(const struct problem *p, const struct shape *s,
		      const struct ak_tensor *in, const struct ak_tensor *out,
		      int64_t r, double *ref, struct row_check *rc)
{
	const struct op *op = p->op;
	int64_t len = op->row_len(s);
	double scalar[4], scale = 1;

	enum ak_dtype dt = in[0].dtype;
	const struct tolerance *tol = &p->tol[dt <= AK_F32 ? dt : AK_F32];

	memcpy(scalar, p->scalar, sizeof(scalar));
	op->scalars(s, scalar);
	op->reference(s, in, scalar, r, ref);
	if (op->row_scale)
		scale = op->row_scale(s, in, scalar, r);
	memset(rc, 0, sizeof(*rc));
	rc->worst_idx = -1;
	rc->lo = rc->ref_lo = INFINITY;
	rc->hi = rc->ref_hi = -INFINITY;
	for (int64_t j = 0; j < len; j++) {
		int64_t idx = r * len + j;
		double got = dtype_load(out->dtype, out->data, idx);
		double lim = tolerance_bound(tol, out->dtype, ref[j], scale);
		double err = fabs(got - ref[j]);
		double ratio = err / (lim > 0 ? lim : 1e-300);

		if (is_poison(out->dtype, out->data, idx)) {
			rc->unwritten++;
			ratio = INFINITY;
		} else if (isnan(got) || isinf(got)) {
			rc->nan++;
			ratio = INFINITY;
		}
		if (!(ratio <= 1))
			rc->bad++;
		if (!(ratio <= rc->worst_ratio) || rc->worst_idx < 0) {
			rc->worst_ratio = ratio;
			rc->worst_idx = idx;
			rc->expected = ref[j];
			rc->actual = got;
			rc->limit = lim;
		}
		rc->lo = fmin(rc->lo, got);
		rc->hi = fmax(rc->hi, got);
		rc->ref_lo = fmin(rc->ref_lo, ref[j]);
		rc->ref_hi = fmax(rc->ref_hi, ref[j]);
	}
}

/* The rows to check: all of them, or a seeded sample with the first and
 * the last when the reference would cost more than REF_BUDGET. */
static int64_t *pick_rows(const struct op *op, const struct shape *s,
			  uint64_t seed, int64_t *n)
{
	int64_t rows = op->rows(s), *pick;
	double per_row = op->flops(s) / (double)rows;
	int64_t want = rows;
	struct rng g;

	if (op->flops(s) > REF_BUDGET) {
		want = (int64_t)(REF_BUDGET / (per_row > 1 ? per_row : 1));
		if (want < MIN_SAMPLE)
			want = MIN_SAMPLE;
		if (want > rows)
			want = rows;
	}
	pick = xmalloc(sizeof(*pick) * (size_t)(want ? want : 1));
	*n = want;
	if (want == rows) {
		for (int64_t i = 0; i < rows; i++)
			pick[i] = i;
		return pick;
	}
	rng_seed(&g, seed ^ 0x5eed5eedULL);
	pick[0] = 0;
	pick[1] = rows - 1;
	for (int64_t i = 2; i < want; i++)
		pick[i] = (int64_t)(rng_next(&g) % (uint64_t)rows);
	return pick;
}

static void element_name(const struct problem *p,
			 const struct ak_tensor *out, int64_t idx,
			 char *buf, size_t n)
{
	const char *d = p->op->out_desc ? p->op->out_desc : "out";
	size_t used = strcspn(d, "[ ");

	used = (size_t)snprintf(buf, n, "%.*s[", (int)used, d);
	if (!out->ndim)
		used += snprintf(buf + used, n - used, "0");
	for (int k = 0; k < out->ndim && used < n; k++) {
		int64_t stride = out->stride[k] ? out->stride[k] : 1;

		used += snprintf(buf + used, n - used, "%s%lld", k ? "," : "",
				 (long long)(idx / stride));
		idx %= stride;
	}
	if (used < n)
		snprintf(buf + used, n - used, "]");
}

/*
 * Compares out[0] with the reference.  0 pass, 1 fail with why.  The
 * checks: every element written, finite, within tolerance, and not a
 * constant where the reference varies.
 */
static int compare(const struct problem *p, const struct shape *s,
		   const struct layout *l, uint64_t seed, json_t *cj,
		   struct strbuf *why)
{
	const struct op *op = p->op;
	int64_t n, *rows = pick_rows(op, s, seed, &n), len = op->row_len(s);
	struct row_check *rc = xcalloc((size_t)n, sizeof(*rc));
	enum ak_dtype dt = l->in[0].dtype;
	const struct tolerance *tol = &p->tol[dt <= AK_F32 ? dt : AK_F32];
	struct row_check w = { 0 };
	int64_t bad = 0, unwritten = 0, nans = 0;
	double lo = INFINITY, hi = -INFINITY, rlo = INFINITY, rhi = -INFINITY;
	char name[128];
	int fail = 0;

	w.worst_idx = -1;
	#pragma omp parallel if (n > 1)
	{
		double *ref = xmalloc(sizeof(double) * (size_t)len);

		#pragma omp for schedule(dynamic, 1)
		for (int64_t i = 0; i < n; i++)
			check_row(p, s, l->in, &l->out[0], rows[i], ref, &rc[i]);
		free(ref);
	}
	for (int64_t i = 0; i < n; i++) {
		bad += rc[i].bad;
		unwritten += rc[i].unwritten;
		nans += rc[i].nan;
		lo = fmin(lo, rc[i].lo);
		hi = fmax(hi, rc[i].hi);
		rlo = fmin(rlo, rc[i].ref_lo);
		rhi = fmax(rhi, rc[i].ref_hi);
		if (w.worst_idx < 0 || !(rc[i].worst_ratio <= w.worst_ratio))
			w = rc[i];
	}
	json_object_set_new(cj, "rows_checked", json_integer(n));
	json_object_set_new(cj, "rows", json_integer(op->rows(s)));
	json_object_set_new(cj, "worst_ratio", json_real(
		isfinite(w.worst_ratio) ? w.worst_ratio : 1e300));
	element_name(p, &l->out[0], w.worst_idx, name, sizeof(name));
	if (unwritten) {
		strbuf_addf(why, "%lld of %lld checked elements not written "
			    "(still poisoned), first bad %s", (long long)unwritten,
			    (long long)(n * len), name);
		fail = 1;
	} else if (bad) {
		strbuf_addf(why, "%s = %.6g, expected %.6g (|err| %.3g, "
			    "tolerance %.3g); %lld of %lld checked elements "
			    "out of tolerance%s", name, w.actual, w.expected,
			    fabs(w.actual - w.expected), w.limit,
			    (long long)bad, (long long)(n * len),
			    nans ? ", some NaN or infinite" : "");
		fail = 1;
	} else if (n * len > 1 && lo == hi && rlo != rhi &&
		   rhi - rlo > tol->atol + tol->rtol * fmax(fabs(rlo), fabs(rhi))) {
		strbuf_addf(why, "every output is %.6g where the reference "
			    "ranges over [%.6g, %.6g]", lo, rlo, rhi);
		fail = 1;
	}
	free(rows);
	free(rc);
	return fail;
}

/* ---- one case ---- */

struct ctx {
	struct runner *r;
	const struct problem *p;
	int slot;
	json_t *cases;
	struct strbuf *why;
};

static uint64_t case_seed(const struct problem *p, int stage, int i)
{
	return p->seed * 1000003ULL + (uint64_t)stage * 1009ULL + (uint64_t)i;
}

/* Calls the kernel once on the case's inputs already in the mapping;
 * 0, or 1 with why. */
static int call_once(struct ctx *x, const struct layout *l,
		     const struct shape *s)
{
	json_t *req = layout_request(x->r, x->p, l, s, "call"), *res;
	int fail = 1;

	json_object_set_new(req, "slot", json_integer(x->slot));
	res = runner_request(x->r, req, x->r->timeout_ms, x->why);
	json_decref(req);
	if (!res)
		return 1;
	if (!json_is_true(json_object_get(res, "ok")))
		strbuf_addf(x->why, "%s",
			    json_string_value(json_object_get(res, "error")));
	else if (json_integer_value(json_object_get(res, "rc")))
		strbuf_addf(x->why, "ak_kernel() returned %lld",
			    (long long)json_integer_value(json_object_get(res, "rc")));
	else if (json_string_value(json_object_get(res, "integrity")))
		strbuf_addf(x->why, "the kernel %s",
			    json_string_value(json_object_get(res, "integrity")));
	else
		fail = 0;
	json_decref(res);
	return fail;
}

static int run_case(struct ctx *x, int stage, int idx, const struct shape *s,
		    enum ak_dtype dt, enum gen_kind g, int repeats)
{
	const struct problem *p = x->p;
	uint64_t seed = case_seed(p, stage, idx);
	struct layout l;
	unsigned char *base, *first = NULL;
	char shape[128];
	json_t *cj;
	long long t0 = now_ns();
	int fail = 0;
	size_t out_bytes;

	layout_make(&l, p, s, dt, 0);
	base = runner_shm(x->r, l.size);
	layout_bind(&l, base);
	p->op->generate(s, l.in, seed, g);
	out_bytes = tensor_bytes(&l.out[0]);
	shape_format(s, shape, sizeof(shape));
	cj = json_pack("{s:s,s:s,s:s,s:I}", "shape", shape, "dtype",
		       dtype_name(dt), "inputs", gen_names[g], "seed",
		       (json_int_t)seed);
	for (int rep = 0; rep < repeats && !fail; rep++) {
		fail = call_once(x, &l, s);
		if (fail)
			break;
		if (rep == 0) {
			fail = compare(p, s, &l, seed, cj, x->why);
			first = xmalloc(out_bytes ? out_bytes : 1);
			memcpy(first, l.out[0].data, out_bytes);
		} else if (memcmp(first, l.out[0].data, out_bytes)) {
			size_t e = 0, es = dtype_size(l.out[0].dtype);
			char name[128];

			while (!memcmp(first + e * es,
				       (unsigned char *)l.out[0].data + e * es, es))
				e++;
			element_name(p, &l.out[0], (int64_t)e, name,
				     sizeof(name));
			strbuf_addf(x->why, "run %d differs from run 1 at %s: "
				    "%.9g vs %.9g", rep + 1, name,
				    dtype_load(l.out[0].dtype, l.out[0].data, e),
				    dtype_load(l.out[0].dtype, first, e));
			fail = 1;
		}
	}
	free(first);
	json_object_set_new(cj, "pass", json_boolean(!fail));
	json_object_set_new(cj, "seconds", json_real((now_ns() - t0) / 1e9));
	if (fail) {
		struct strbuf head = STRBUF_INIT;

		strbuf_addf(&head, "%s %s%s%s: ", shape, dtype_name(dt),
			    g != GEN_NORMAL ? " " : "",
			    g != GEN_NORMAL ? gen_names[g] : "");
		strbuf_insert_front(x->why, head.buf);
		json_object_set_new(cj, "error", json_string(x->why->buf));
		strbuf_release(&head);
	}
	json_array_append_new(x->cases, cj);
	return fail;
}

/* ---- the stages ---- */

static int stage_run(struct ctx *x, int stage)
{
	const struct problem *p = x->p;
	int i = 0;

	switch (stage) {
	case 0:
		return run_case(x, 0, 0, &p->smoke, p->dtypes[0], GEN_NORMAL, 1);
	case 1:
		for (int s = 0; s < p->n_test; s++)
			for (int d = 0; d < p->n_dtypes; d++)
				if (run_case(x, 1, i++, &p->test[s], p->dtypes[d],
					     (s + d) % 3 == 2 ? GEN_UNIFORM :
					     GEN_NORMAL, 1))
					return 1;
		return 0;
	case 2:
		for (int g = GEN_LARGE; g < GEN_KINDS; g++) {
			if (!(p->op->stability & (1u << g)))
				continue;
			for (int d = 0; d < p->n_dtypes; d++)
				if (run_case(x, 2, i++, p->n_test ? &p->test[0] :
					     &p->smoke, p->dtypes[d],
					     (enum gen_kind)g, 1))
					return 1;
		}
		return 0;
	case 3:
		return run_case(x, 3, 0, p->n_test ? &p->test[0] : &p->smoke,
				p->dtypes[0], GEN_NORMAL, 3);
	default:
		for (int s = 0; s < p->n_edge; s++)
			for (int d = 0; d < p->n_dtypes; d++)
				if (run_case(x, 4, i++, &p->edge[s], p->dtypes[d],
					     GEN_NORMAL, 1))
					return 1;
		return 0;
	}
}

int verify_stages(struct runner *r, const struct problem *p, int slot,
		  json_t **result, struct strbuf *verdict, FILE *progress)
{
	json_t *stages = json_array();
	struct strbuf why = STRBUF_INIT;
	int passed = 0, fail = 0;
	long long t_all = now_ns();

	for (int st = 0; st < 5 && !fail; st++) {
		struct ctx x = { r, p, slot, json_array(), &why };
		long long t0 = now_ns();

		fail = stage_run(&x, st);
		json_array_append_new(stages, json_pack("{s:s,s:b,s:f,s:o}",
			"name", stage_names[st], "pass", !fail,
			"seconds", (now_ns() - t0) / 1e9, "cases", x.cases));
		if (progress)
			fprintf(progress, "  %d %-12s %-4s %6.2f s\n", st + 1,
				stage_names[st], fail ? "FAIL" : "ok",
				(now_ns() - t0) / 1e9);
		if (fail)
			strbuf_addf(verdict, "stage %d (%s) failed at %s",
				    st + 1, stage_names[st], why.buf);
		else
			passed++;
		if (run_interrupted) {
			fail = 1;
			strbuf_addstr(verdict, "interrupted");
		}
	}
	*result = json_pack("{s:b,s:i,s:o,s:f}", "pass", !fail,
			    "stages_passed", passed, "stages", stages,
			    "seconds", (now_ns() - t_all) / 1e9);
	if (fail)
		json_object_set_new(*result, "verdict", json_string(verdict->buf));
	strbuf_release(&why);
	return fail;
}

/* ---- benchmark ---- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double quantile(const double *v, size_t n, double q)
{
	double pos = q * (double)(n - 1);
	size_t i = (size_t)pos;
	double f = pos - (double)i;

	if (i + 1 >= n)
		return v[n - 1];
	return v[i] * (1 - f) + v[i + 1] * f;
}

/* {median, q1, q3, n, min} of a JSON array of microseconds. */
static json_t *stats(json_t *samples)
{
	size_t n = json_array_size(samples);
	double *v;
	json_t *s;

	if (!n)
		return json_pack("{s:i}", "n", 0);
	v = xmalloc(sizeof(double) * n);
	for (size_t i = 0; i < n; i++)
		v[i] = json_number_value(json_array_get(samples, i));
	qsort(v, n, sizeof(double), cmp_double);
	s = json_pack("{s:f,s:f,s:f,s:f,s:I}", "median_us", quantile(v, n, 0.5),
		      "q1_us", quantile(v, n, 0.25), "q3_us", quantile(v, n, 0.75),
		      "min_us", v[0], "n", (json_int_t)n);
	free(v);
	return s;
}

static double floor_us(const struct problem *p, const struct shape *s,
		       enum ak_dtype dt, double copy_us, json_t *ceilings,
		       const char **kind)
{
	double rate = json_number_value(json_object_get(json_object_get(
		ceilings, "matrix_tflops"), dtype_name(dt)));
	double t;

	*kind = "copy";
	if (!p->op->compute_bound || rate <= 0)
		return copy_us;
	t = p->op->flops(s) / (rate * 1e6);
	if (t > copy_us) {
		*kind = "matrix";
		return t;
	}
	return copy_us;
}

/*
 * Under what time a measurement is impossible.  A matrix floor is the
 * flops at the device's measured rate: 80% of it.  A copy floor is the
 * time of a same-size copy, which at small sizes is mostly ramp: a
 * kernel that only reads (reduce) ramps faster and may beat it, so the
 * bound is the op's bytes at the device's large-copy bandwidth (80% of
 * that time), or half the same-size copy, whichever is larger.
 */
static double impossible_under(const struct problem *p, enum ak_dtype dt,
			       double fl, const char *kind, json_t *ceilings)
{
	double gbps = json_number_value(json_object_get(ceilings, "copy_gbps"));
	double bw;

	if (!strcmp(kind, "matrix") || gbps <= 0)
		return 0.8 * fl;
	bw = 0.8 * p->op->bytes(&p->bench, dt) / (gbps * 1e3);
	return bw > 0.5 * fl ? bw : 0.5 * fl;
}

static int bench_check_outputs(const struct problem *p, struct layout *l,
			       int n, json_t *kernels, struct strbuf *verdict)
{
	size_t out_bytes = tensor_bytes(&l->out[0]);

	for (int i = 0; i < n; i++) {
		struct layout li = *l;
		json_t *cj = json_object();
		struct strbuf why = STRBUF_INIT;
		int fail;

		li.out[0].data = (unsigned char *)l->out[0].data + out_bytes * i;
		fail = compare(p, &p->bench, &li, p->seed, cj, &why);
		json_object_set_new(json_array_get(kernels, i), "output_check", cj);
		if (fail) {
			strbuf_addf(verdict, "kernel %d: wrong output of a timed "
				    "call at the bench shape: %s", i, why.buf);
			strbuf_release(&why);
			return 1;
		}
		strbuf_release(&why);
	}
	return 0;
}

int bench_slots(struct runner *r, const struct problem *p, enum ak_dtype dt,
		const int *slots, int n, json_t *ceilings, json_t **result,
		struct strbuf *verdict)
{
	struct layout l;
	json_t *req, *res, *outs = json_array(), *js = json_array(), *times;
	json_t *kernels = json_array(), *copy;
	double copy_med, fl, lim, budget = 1500;
	const char *kind, *env = getenv("AUTOKERNEL_BENCH_MS");
	char shape[128];
	size_t out_bytes;
	int ret = 0;

	if (env && atof(env) > 0)
		budget = atof(env);
	layout_make(&l, p, &p->bench, dt, n - 1);
	layout_bind(&l, runner_shm(r, l.size));
	p->op->generate(&p->bench, l.in, p->seed, GEN_NORMAL);
	out_bytes = tensor_bytes(&l.out[0]);
	for (int i = 0; i < n; i++) {
		json_array_append_new(js, json_integer(slots[i]));
		json_array_append_new(outs, json_pack("[I]",
			(json_int_t)(l.out_off[0] + out_bytes * i)));
	}
	req = layout_request(r, p, &l, &p->bench, "bench");
	json_object_set_new(req, "slots", js);
	json_object_set_new(req, "outs", outs);
	json_object_set_new(req, "warmup", json_integer(3));
	json_object_set_new(req, "iters", json_integer(400));
	json_object_set_new(req, "min_iters", json_integer(15));
	json_object_set_new(req, "budget_ms", json_real(budget));
	json_object_set_new(req, "rotate", json_integer(2));
	json_object_set_new(req, "copy_bytes",
		json_integer((json_int_t)p->op->bytes(&p->bench, dt)));
	res = runner_request(r, req, r->timeout_ms * (n + 1) +
			     (int)(4 * budget), verdict);
	json_decref(req);
	if (!res)
		return 1;
	if (!json_is_true(json_object_get(res, "ok"))) {
		strbuf_addf(verdict, "benchmark failed: %s",
			    json_string_value(json_object_get(res, "error")));
		json_decref(res);
		return 1;
	}
	if (json_integer_value(json_object_get(res, "rc")) ||
	    json_string_value(json_object_get(res, "integrity"))) {
		strbuf_addf(verdict, "during timing, slot %lld: %s",
			    (long long)json_integer_value(json_object_get(res, "slot")),
			    json_string_value(json_object_get(res, "integrity")) ?
			    json_string_value(json_object_get(res, "integrity")) :
			    "ak_kernel() returned an error");
		json_decref(res);
		return 1;
	}
	times = json_object_get(res, "times");
	copy = stats(json_object_get(times, "copy"));
	copy_med = json_number_value(json_object_get(copy, "median_us"));
	fl = floor_us(p, &p->bench, dt, copy_med, ceilings, &kind);
	for (int i = 0; i < n; i++) {
		char key[16];
		json_t *st;
		double med;

		snprintf(key, sizeof(key), "%d", slots[i]);
		st = stats(json_object_get(times, key));
		med = json_number_value(json_object_get(st, "median_us"));
		json_object_set_new(st, "roofline", json_real(fl / med));
		json_array_append_new(kernels, st);
	}
	shape_format(&p->bench, shape, sizeof(shape));
	*result = json_pack("{s:s,s:s,s:o,s:o,s:f,s:s,s:f}", "shape", shape,
			    "dtype", dtype_name(dt), "kernels", kernels,
			    "copy", copy, "floor_us", fl, "floor_kind", kind,
			    "bytes", p->op->bytes(&p->bench, dt));
	json_object_set_new(*result, "flops", json_real(p->op->flops(&p->bench)));
	json_decref(res);
	ret = bench_check_outputs(p, &l, n, kernels, verdict);
	lim = impossible_under(p, dt, fl, kind, ceilings);
	for (int i = 0; !ret && i < n; i++) {
		double med = json_number_value(json_object_get(
			json_array_get(kernels, i), "median_us"));

		/* The host's floor is one core's copy (dev-host.c), which a
		 * parallel kernel may beat: the check is for GPU timings. */
		if (med < lim && strcmp(p->backend, "host")) {
			strbuf_addf(verdict, "kernel %d: %.2f us is under %.2f us, "
				    "faster than the device can move its bytes "
				    "or do its flops (floor %.2f us): impossible, "
				    "so the timing cannot be trusted", i, med, lim,
				    fl);
			ret = 1;
		}
	}
	return ret;
}

/* The standard error of a median from the interquartile range. */
static double median_se(json_t *k)
{
	double iqr = json_number_value(json_object_get(k, "q3_us")) -
		json_number_value(json_object_get(k, "q1_us"));
	double n = (double)json_integer_value(json_object_get(k, "n"));

	return 0.93 * iqr / sqrt(n > 1 ? n : 1);
}

int bench_keep(json_t *bench, double min_gain, struct strbuf *why)
{
	json_t *ks = json_object_get(bench, "kernels");
	json_t *a = json_array_get(ks, 0), *b = json_array_get(ks, 1);
	double ta = json_number_value(json_object_get(a, "median_us"));
	double tb = json_number_value(json_object_get(b, "median_us"));
	double noise = 2 * sqrt(median_se(a) * median_se(a) +
				median_se(b) * median_se(b));
	double gain = (tb - ta) / tb;

	if (ta <= 0 || tb <= 0) {
		strbuf_addstr(why, "no timing");
		return 0;
	}
	if (ta - tb > noise) {
		strbuf_addf(why, "slower: %.2f us vs %.2f us (%+.1f%%, noise "
			    "%.2f us)", ta, tb, -gain * 100, noise);
		return 0;
	}
	if (tb - ta <= noise) {
		strbuf_addf(why, "not faster: %.2f us vs %.2f us (%+.1f%%), "
			    "within the noise (%.2f us)", ta, tb, -gain * 100,
			    noise);
		return 0;
	}
	if (gain < min_gain) {
		strbuf_addf(why, "gain %.2f%% is under autokernel.minGain "
			    "(%.2f%%): %.2f us vs %.2f us", gain * 100,
			    min_gain * 100, ta, tb);
		return 0;
	}
	strbuf_addf(why, "faster: %.2f us vs %.2f us (%.1f%% gain, noise "
		    "%.2f us)", ta, tb, gain * 100, noise);
	return 1;
}
