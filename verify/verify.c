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
	const struct device_use *dev;
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
	if (x->dev)
		x->dev->enter(x->dev->arg);
	res = runner_request(x->r, req, x->r->timeout_ms, x->why);
	if (x->dev)
		x->dev->leave(x->dev->arg);
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
			fail = refs_compare(p, c->s, c->dt, &l.out[0], &c->refs, cj,
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
		  struct cases *cs, int slot, const struct device_use *dev,
		  json_t **result, struct strbuf *verdict, FILE *progress)
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
		struct ctx x = { r, p, slot, dev, json_array(), &why };
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

