/*
 * compare.c: an output against its fp64 reference, row by row, and the
 * request that lays a case's tensors out for the runner.  For the stages
 * (verify.c) and the benchmark (bench.c) alike.
 */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ops/dtype.h"
#include "verify/cases.h"

static json_t *tensor_json(const struct ak_tensor *t, size_t off, int out)
{
	json_t *shape = json_array();

	for (int d = 0; d < t->ndim; d++)
		json_array_append_new(shape, json_integer(t->shape[d]));
	return json_pack("{s:i,s:o,s:I,s:b}", "dtype", (int)t->dtype,
			 "shape", shape, "offset", (json_int_t)off, "out", out);
}

json_t *layout_request(struct runner *r, const struct problem *p,
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
	/* where the row is in out: at its place, or i-th of packed rows */
	int64_t at = rf->packed ? i * rf->len : first;

	memset(rc, 0, sizeof(*rc));
	rc->worst_idx = -1;
	rc->lo = rc->ref_lo = INFINITY;
	rc->hi = rc->ref_hi = -INFINITY;
	dtype_load_span(out->dtype, out->data, at, rf->len, got);
	for (int64_t j = 0; j < rf->len; j++) {
		double lim = tolerance_bound(tol, out->dtype, ref[j],
					     rf->scale[i]);
		double ratio = fabs(got[j] - ref[j]) / (lim > 0 ? lim : 1e-300);

		/* the poison is a NaN in every float dtype */
		if (!isfinite(got[j])) {
			if (is_poison(out->dtype, out->data, at + j))
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

void element_name(const struct problem *p,
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
int refs_compare(const struct problem *p, const struct shape *s,
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

