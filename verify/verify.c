/*
 * verify.c: the five stages and the benchmark.  A case's inputs (made
 * ahead by cases.c) are copied into the runner's shared mapping, the
 * runner makes the call under its integrity checks, and the outputs are
 * compared here with the fp64 reference, row by row (every row, or a
 * seeded sample of at least 64 when the reference would take too long).
 */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "verify/cases.h"
#include "ops/dtype.h"

void verify_set_threads(int n)
{
	omp_set_num_threads(n > 0 ? n : 1);
}

const char *const stage_names[5] = {
	"smoke", "shape sweep", "stability", "determinism", "edge cases",
};

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

/* Row rf->rows[i] of out against its reference; got: row_len doubles
 * of scratch. */
static void check_row(const struct problem *p, enum ak_dtype dt,
		      const struct ak_tensor *out, const struct refs *rf,
		      int64_t i, double *got, struct row_check *rc)
{
	const struct tolerance *tol = &p->tol[dt <= AK_F32 ? dt : AK_F32];
	const double *ref = rf->ref + i * rf->len;
	int64_t first = rf->rows[i] * rf->len;

	memset(rc, 0, sizeof(*rc));
	rc->worst_idx = -1;
	rc->lo = rc->ref_lo = INFINITY;
	rc->hi = rc->ref_hi = -INFINITY;
	dtype_load_span(out->dtype, out->data, first, rf->len, got);
	for (int64_t j = 0; j < rf->len; j++) {
		double lim = tolerance_bound(tol, out->dtype, ref[j],
					     rf->scale[i]);
		double ratio = fabs(got[j] - ref[j]) / (lim > 0 ? lim : 1e-300);

		/* the poison is a NaN in every float dtype */
		if (!isfinite(got[j])) {
			if (is_poison(out->dtype, out->data, first + j))
				rc->unwritten++;
			else
				rc->nan++;
			ratio = INFINITY;
		}
		if (!(ratio <= 1))
			rc->bad++;
		if (!(ratio <= rc->worst_ratio) || rc->worst_idx < 0) {
			rc->worst_ratio = ratio;
			rc->worst_idx = first + j;
			rc->expected = ref[j];
			rc->actual = got[j];
			rc->limit = lim;
		}
		/* comparisons skip a NaN as fmin() and fmax() do */
		if (got[j] < rc->lo)
			rc->lo = got[j];
		if (got[j] > rc->hi)
			rc->hi = got[j];
		if (ref[j] < rc->ref_lo)
			rc->ref_lo = ref[j];
		if (ref[j] > rc->ref_hi)
			rc->ref_hi = ref[j];
	}
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
 * Compares out, the output at s of inputs of dtype dt, with the reference
 * rf.  0 pass, 1 fail with why.  The checks: every element
 * written, finite, within tolerance, and not a constant where the
 * reference varies.
 */
static int compare(const struct problem *p, const struct shape *s,
		   enum ak_dtype dt, const struct ak_tensor *out,
		   const struct refs *rf, json_t *cj, struct strbuf *why)
{
	int64_t n = rf->n, len = rf->len;
	struct row_check *rc = xcalloc((size_t)(n ? n : 1), sizeof(*rc));
	const struct tolerance *tol = &p->tol[dt <= AK_F32 ? dt : AK_F32];
	struct row_check w = { 0 };
	int64_t bad = 0, unwritten = 0, nans = 0;
	double lo = INFINITY, hi = -INFINITY, rlo = INFINITY, rhi = -INFINITY;
	char name[128];
	int fail = 0;

	w.worst_idx = -1;
	#pragma omp parallel if (n > 1)
	{
		double *got = xmalloc(sizeof(double) * (size_t)(len + 1));

		#pragma omp for schedule(dynamic, 1)
		for (int64_t i = 0; i < n; i++)
			check_row(p, dt, out, rf, i, got, &rc[i]);
		free(got);
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
	json_object_set_new(cj, "rows", json_integer(p->op->rows(s)));
	json_object_set_new(cj, "worst_ratio", json_real(
		isfinite(w.worst_ratio) ? w.worst_ratio : 1e300));
	element_name(p, out, w.worst_idx, name, sizeof(name));
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
	free(rc);
	return fail;
}

/* ---- one case ---- */

/* Case c's inputs into r's mapping, laid out (l) with extra_outs more
 * copies of the outputs. */
static void case_load(struct layout *l, struct runner *r,
		      const struct problem *p, const struct vcase *c,
		      int extra_outs)
{
	unsigned char *base;

	layout_make(l, p, c->s, c->dt, extra_outs);
	base = runner_shm(r, l->size);
	layout_bind(l, base);
	memcpy(base, c->inputs, c->in_size);
}

struct ctx {
	struct runner *r;
	const struct problem *p;
	int slot;
	json_t *cases;
	struct strbuf *why;
};

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

/* Runs 2..repeats must give run 1's bytes; 0, or 1 with why. */
static int same_as_first(struct ctx *x, const struct ak_tensor *out,
			 const unsigned char *first, int rep)
{
	size_t n = tensor_bytes(out), e = 0, es = dtype_size(out->dtype);
	const unsigned char *now = out->data;
	char name[128];

	if (!memcmp(first, now, n))
		return 0;
	while (!memcmp(first + e * es, now + e * es, es))
		e++;
	element_name(x->p, out, (int64_t)e, name, sizeof(name));
	strbuf_addf(x->why, "run %d differs from run 1 at %s: %.9g vs %.9g",
		    rep + 1, name, dtype_load(out->dtype, now, e),
		    dtype_load(out->dtype, first, e));
	return 1;
}

static int run_case(struct ctx *x, const struct vcase *c)
{
	const struct problem *p = x->p;
	struct layout l;
	unsigned char *first = NULL;
	char shape[128];
	json_t *cj;
	long long t0 = now_ns();
	int fail = 0;
	size_t out_bytes;

	case_load(&l, x->r, p, c, 0);
	out_bytes = tensor_bytes(&l.out[0]);
	shape_format(c->s, shape, sizeof(shape));
	cj = json_pack("{s:s,s:s,s:s,s:I}", "shape", shape, "dtype",
		       dtype_name(c->dt), "inputs", gen_name(c->g), "seed",
		       (json_int_t)c->seed);
	for (int rep = 0; rep < c->repeats && !fail; rep++) {
		long long t1 = now_ns();

		fail = call_once(x, &l, c->s);
		trace("verify", "%s %s: call answered in %.2f ms", shape,
		      dtype_name(c->dt), ms_since(t1));
		if (fail)
			break;
		if (rep == 0) {
			t1 = now_ns();
			fail = compare(p, c->s, c->dt, &l.out[0], &c->refs, cj,
				       x->why);
			trace("verify", "compared in %.2f ms", ms_since(t1));
			first = xmalloc(out_bytes ? out_bytes : 1);
			memcpy(first, l.out[0].data, out_bytes);
		} else {
			fail = same_as_first(x, &l.out[0], first, rep);
		}
	}
	free(first);
	json_object_set_new(cj, "pass", json_boolean(!fail));
	json_object_set_new(cj, "seconds", json_real((now_ns() - t0) / 1e9));
	if (fail) {
		struct strbuf head = STRBUF_INIT;

		strbuf_addf(&head, "%s %s%s%s: ", shape, dtype_name(c->dt),
			    c->g != GEN_NORMAL ? " " : "",
			    c->g != GEN_NORMAL ? gen_name(c->g) : "");
		strbuf_insert_front(x->why, head.buf);
		json_object_set_new(cj, "error", json_string(x->why->buf));
		strbuf_release(&head);
	}
	json_array_append_new(x->cases, cj);
	return fail;
}

/* ---- the stages ---- */

static int stage_run(struct ctx *x, struct cases *cs, int stage)
{
	int fail = 0;

	for (int i = cs->first[stage]; i < cs->first[stage + 1] && !fail; i++) {
		fail = run_case(x, cases_get(cs, i));
		cases_put(cs, i);
	}
	return fail;
}

int verify_stages(struct runner *r, const struct problem *p,
		  struct cases *cs, int slot, json_t **result,
		  struct strbuf *verdict, FILE *progress)
{
	struct cases *own = cs ? NULL : cases_plan(p, -1, 0);
	json_t *stages = json_array();
	struct strbuf why = STRBUF_INIT;
	int passed = 0, fail = 0;
	long long t_all = now_ns();

	if (own)
		cs = own;
	cases_map(cs, r);
	for (int st = 0; st < 5 && !fail; st++) {
		struct ctx x = { r, p, slot, json_array(), &why };
		long long t0 = now_ns();

		phase("stage %d/5 %s", st + 1, stage_names[st]);

		fail = stage_run(&x, cs, st);
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
	cases_free(own);
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
			       const struct vcase *c, int n, json_t *kernels,
			       struct strbuf *verdict)
{
	size_t out_bytes = tensor_bytes(&l->out[0]);

	for (int i = 0; i < n; i++) {
		struct ak_tensor out = l->out[0];
		json_t *cj = json_object();
		struct strbuf why = STRBUF_INIT;
		int fail;

		out.data = (unsigned char *)l->out[0].data + out_bytes * i;
		fail = compare(p, &p->bench, c->dt, &out, &c->refs, cj, &why);
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

static int bench_run(struct runner *r, const struct problem *p,
		     const struct vcase *c, const int *slots, int n,
		     json_t *ceilings, json_t **result, struct strbuf *verdict)
{
	enum ak_dtype dt = c->dt;
	struct layout l;
	json_t *req, *res, *outs = json_array(), *js = json_array(), *times;
	json_t *kernels = json_array(), *copy;
	double copy_med, fl, lim, budget = 1500;
	const char *kind, *env = getenv("AUTOKERNEL_BENCH_MS");
	char shape[128];
	size_t out_bytes;
	long long t0 = now_ns();
	int ret = 0;

	if (env && atof(env) > 0)
		budget = atof(env);
	case_load(&l, r, p, c, n - 1);
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
	trace("bench", "runner answered in %.2f ms", ms_since(t0));
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
	t0 = now_ns();
	ret = bench_check_outputs(p, &l, c, n, kernels, verdict);
	trace("bench", "outputs checked in %.2f ms", ms_since(t0));
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

int bench_slots(struct runner *r, const struct problem *p, struct cases *cs,
		enum ak_dtype dt, const int *slots, int n, json_t *ceilings,
		json_t **result, struct strbuf *verdict)
{
	struct cases *own = NULL;
	int ret;

	if (!cs || cs->bench < 0 || cs->c[cs->bench].dt != dt) {
		/* no thread may load the CPU while a host kernel is timed */
		if (cs)
			cases_halt(cs);
		cs = own = cases_plan(p, dt, 0);
	}
	ret = bench_run(r, p, cases_get(cs, cs->bench), slots, n, ceilings,
			result, verdict);
	cases_put(cs, cs->bench);
	cases_free(own);
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
	/* The middle halves of the two samples apart: beyond the noise
	 * whatever the standard errors say, which a loaded machine's
	 * preempted calls inflate (an 18x faster host kernel was once "within
	 * the noise" of a best whose IQR spanned milliseconds). */
	int apart = json_number_value(json_object_get(a, "q3_us")) <
		json_number_value(json_object_get(b, "q1_us"));

	if (ta <= 0 || tb <= 0) {
		strbuf_addstr(why, "no timing");
		return 0;
	}
	if (ta - tb > noise) {
		strbuf_addf(why, "slower: %.2f us vs %.2f us (%+.1f%%, noise "
			    "%.2f us)", ta, tb, -gain * 100, noise);
		return 0;
	}
	if (tb - ta <= noise && !apart) {
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
		    "%.2f us%s)", ta, tb, gain * 100, noise, tb - ta <= noise ?
		    "; the middle halves of the timings do not overlap" : "");
	return 1;
}
