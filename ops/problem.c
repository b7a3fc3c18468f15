#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "ops/dtype.h"
#include "ops/problem.h"
#include "lib/strbuf.h"

static const struct {
	const char *name, *ext;
} backends[] = {
	{ "host", ".c" },
	{ "cuda", ".cu" },
	{ "hip", ".hip" },
	{ "triton", ".py" },
};

const char *backend_ext(const char *backend)
{
	for (size_t i = 0; i < ARRAY_SIZE(backends); i++)
		if (!strcmp(backends[i].name, backend))
			return backends[i].ext;
	return NULL;
}

int backend_known(const char *backend)
{
	return backend && backend_ext(backend) != NULL;
}


#define DEFAULT_SEED 20261202ULL

static int parse_shape_or_die(struct shape *s, const struct op *op,
			      const char *str)
{
	char err[256];

	if (shape_parse(s, op, str, err, sizeof(err)) < 0)
		return error("%s", err);
	return 0;
}

static int parse_list(struct shape *out, int *n, const struct op *op,
		      const char *const *list)
{
	*n = 0;
	for (; *list && *n < AK_OP_MAX_SHAPES; list++)
		if (parse_shape_or_die(&out[(*n)++], op, *list) < 0)
			return -1;
	return 0;
}

void problem_default(struct problem *p, const struct op *op,
		     const char *backend)
{
	memset(p, 0, sizeof(*p));
	p->op = op;
	snprintf(p->backend, sizeof(p->backend), "%s", backend);
	snprintf(p->kernel, sizeof(p->kernel), "kernel%s",
		 backend_ext(backend) ? backend_ext(backend) : ".c");
	p->dtypes[0] = AK_F16;
	p->dtypes[1] = AK_BF16;
	p->dtypes[2] = AK_F32;
	p->n_dtypes = 3;
	if (parse_shape_or_die(&p->smoke, op, op->smoke_shape) ||
	    parse_shape_or_die(&p->bench, op, strcmp(backend, "host") ?
			       op->bench_shape : op->host_bench_shape) ||
	    parse_list(p->test, &p->n_test, op, op->test_shapes) ||
	    parse_list(p->edge, &p->n_edge, op, op->edge_shapes))
		die("the built-in shapes of '%s' do not parse", op->name);
	memcpy(p->tol, op->tol, sizeof(p->tol));
	op->scalars(&p->bench, p->scalar);
	p->seed = DEFAULT_SEED;
	p->n_work = 1;
	p->work[0] = (struct work){ p->bench, 1.0, p->dtypes[0] };
}

void problem_normalize_workload(struct problem *p)
{
	double sum = 0;

	for (int i = 0; i < p->n_work; i++)
		sum += p->work[i].weight;
	for (int i = 0; i < p->n_work; i++)
		p->work[i].weight /= sum > 0 ? sum : 1;
	if (p->n_work)
		p->bench = p->work[0].s;
}

static int has_dtype(const struct problem *p, enum ak_dtype dt)
{
	for (int i = 0; i < p->n_dtypes; i++)
		if (p->dtypes[i] == dt)
			return 1;
	return 0;
}

/* One "SHAPE[:WEIGHT[:DTYPE]]" into w; 0 or error(). */
static int parse_work(struct work *w, const struct problem *p,
		      const char *spec)
{
	char *copy = xstrdup(spec), *weight = strchr(copy, ':'), *dt = NULL;
	char *end;
	int ret = 0;

	if (weight) {
		*weight++ = '\0';
		if ((dt = strchr(weight, ':')))
			*dt++ = '\0';
	}
	w->weight = 1.0;
	w->dt = p->dtypes[0];
	if (parse_shape_or_die(&w->s, p->op, copy) < 0)
		ret = -1;
	else if (weight && *weight &&
		 (!((w->weight = strtod(weight, &end)) > 0) || *end))
		ret = error("bad weight '%s' in '%s': a number over 0", weight,
			    spec);
	else if (dt && (dtype_parse(dt, &w->dt) < 0 || !has_dtype(p, w->dt)))
		ret = error("dtype '%s' in '%s' is not one of the problem's",
			    dt, spec);
	free(copy);
	return ret;
}

int problem_set_workload(struct problem *p, const char *const *specs, int n)
{
	if (n > AK_OP_MAX_SHAPES)
		return error("at most %d workload shapes", AK_OP_MAX_SHAPES);
	for (int i = 0; i < n; i++)
		if (parse_work(&p->work[i], p, specs[i]) < 0)
			return -1;
	p->n_work = n;
	problem_normalize_workload(p);
	return 0;
}

int problem_set_dtypes(struct problem *p, const char *list)
{
	char *copy = xstrdup(list), *s = copy;
	int n = 0, ret = 0;

	while (s && *s) {
		char *comma = strchr(s, ',');
		enum ak_dtype dt;

		if (comma)
			*comma = '\0';
		if (dtype_parse(s, &dt) < 0 || dt > AK_F32) {
			ret = error("unknown dtype '%s' (f16, bf16, f32)", s);
			break;
		}
		if (n == 3) {
			ret = error("too many dtypes in '%s'", list);
			break;
		}
		p->dtypes[n++] = dt;
		s = comma ? comma + 1 : NULL;
	}
	if (!ret && !n)
		ret = error("no dtype in '%s'", list);
	if (!ret)
		p->n_dtypes = n;
	for (int i = 0; !ret && i < p->n_work; i++)
		if (!has_dtype(p, p->work[i].dt))
			p->work[i].dt = p->dtypes[0];
	free(copy);
	return ret;
}

int op_layout_index(const struct op *op, const char *name)
{
	for (int i = 0; op->layouts && op->layouts[i]; i++)
		if (!strcmp(op->layouts[i], name))
			return i;
	return -1;
}

const char *op_layout_name(const struct op *op, int i)
{
	for (int k = 0; op->layouts && op->layouts[k]; k++)
		if (k == i)
			return op->layouts[k];
	return NULL;
}

const char *problem_layout(const struct problem *p)
{
	int i = (int)p->scalar[0];

	return i == p->scalar[0] ? op_layout_name(p->op, i) : NULL;
}

int problem_set_layout(struct problem *p, const char *name)
{
	int i = op_layout_index(p->op, name);

	if (!p->op->layouts)
		return error("'%s' takes no layout", p->op->name);
	if (i < 0) {
		struct strbuf all = STRBUF_INIT;

		for (int k = 0; p->op->layouts[k]; k++)
			strbuf_addf(&all, "%s%s", k ? ", " : "",
				    p->op->layouts[k]);
		error("unknown layout '%s' for '%s' (%s)", name, p->op->name,
		      all.buf);
		strbuf_release(&all);
		return -1;
	}
	p->scalar[0] = i;
	return 0;
}

static json_t *shape_json(const struct shape *s)
{
	char buf[128];

	shape_format(s, buf, sizeof(buf));
	return json_string(buf);
}

static json_t *workload_json(const struct problem *p)
{
	json_t *a = json_array();

	for (int i = 0; i < p->n_work; i++)
		json_array_append_new(a, json_pack("{s:o,s:f,s:s}", "shape",
			shape_json(&p->work[i].s), "weight", p->work[i].weight,
			"dtype", dtype_name(p->work[i].dt)));
	return a;
}

char *problem_dump(const struct problem *p)
{
	json_t *j = json_object(), *a, *tol = json_object();
	char *text;

	json_object_set_new(j, "version", json_integer(1));
	json_object_set_new(j, "op", json_string(p->op->name));
	json_object_set_new(j, "backend", json_string(p->backend));
	json_object_set_new(j, "kernel", json_string(p->kernel));
	a = json_array();
	for (int i = 0; i < p->n_dtypes; i++)
		json_array_append_new(a, json_string(dtype_name(p->dtypes[i])));
	json_object_set_new(j, "dtypes", a);
	json_object_set_new(j, "bench_shape", shape_json(&p->bench));
	if (p->n_work > 1 || p->work[0].dt != p->dtypes[0])
		json_object_set_new(j, "workload", workload_json(p));
	json_object_set_new(j, "smoke_shape", shape_json(&p->smoke));
	a = json_array();
	for (int i = 0; i < p->n_test; i++)
		json_array_append_new(a, shape_json(&p->test[i]));
	json_object_set_new(j, "test_shapes", a);
	a = json_array();
	for (int i = 0; i < p->n_edge; i++)
		json_array_append_new(a, shape_json(&p->edge[i]));
	json_object_set_new(j, "edge_shapes", a);
	for (int d = 0; d < 3; d++)
		json_object_set_new(tol, dtype_name((enum ak_dtype)d),
			json_pack("{s:f,s:f}", "atol", p->tol[d].atol,
				  "rtol", p->tol[d].rtol));
	json_object_set_new(j, "tolerances", tol);
	if (problem_layout(p))
		json_object_set_new(j, "layout",
				    json_string(problem_layout(p)));
	a = json_array();
	for (int i = 0; i < 4; i++)
		json_array_append_new(a, json_real(p->scalar[i]));
	json_object_set_new(j, "scalars", a);
	json_object_set_new(j, "seed", json_integer((json_int_t)p->seed));
	text = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(j);
	return text;
}

static int get_shapes(json_t *j, const char *key, struct shape *out, int *n,
		      const struct op *op, const char *origin)
{
	json_t *a = json_object_get(j, key), *v;
	size_t i;

	if (!json_is_array(a) || json_array_size(a) > AK_OP_MAX_SHAPES)
		return error("%s: '%s' must be a list of at most %d shapes",
			     origin, key, AK_OP_MAX_SHAPES);
	*n = 0;
	json_array_foreach(a, i, v) {
		if (!json_is_string(v))
			return error("%s: '%s' holds a non-string", origin, key);
		if (parse_shape_or_die(&out[(*n)++], op,
				       json_string_value(v)) < 0)
			return error("%s: bad shape in '%s'", origin, key);
	}
	return 0;
}

static int get_shape(json_t *j, const char *key, struct shape *s,
		     const struct op *op, const char *origin)
{
	const char *v = json_string_value(json_object_get(j, key));

	if (!v)
		return error("%s: missing '%s'", origin, key);
	if (parse_shape_or_die(s, op, v) < 0)
		return error("%s: bad '%s'", origin, key);
	return 0;
}

/* "workload": [{"shape", "weight", "dtype"}, ...]; absent, the bench
 * shape alone at the first dtype. */
static int get_workload(json_t *j, struct problem *p, const char *origin)
{
	json_t *a = json_object_get(j, "workload"), *v;
	size_t i;

	p->n_work = 1;
	p->work[0] = (struct work){ p->bench, 1.0, p->dtypes[0] };
	if (!a)
		return 0;
	if (!json_is_array(a) || !json_array_size(a) ||
	    json_array_size(a) > AK_OP_MAX_SHAPES)
		return error("%s: 'workload' must be a list of 1 to %d shapes",
			     origin, AK_OP_MAX_SHAPES);
	json_array_foreach(a, i, v) {
		struct work *w = &p->work[i];
		const char *dt = json_string_value(json_object_get(v, "dtype"));
		json_t *wt = json_object_get(v, "weight");

		if (get_shape(v, "shape", &w->s, p->op, origin) < 0)
			return -1;
		w->weight = wt ? json_number_value(wt) : 1.0;
		if (!(w->weight > 0))
			return error("%s: workload weights must be over 0",
				     origin);
		w->dt = p->dtypes[0];
		if (dt && (dtype_parse(dt, &w->dt) < 0 || !has_dtype(p, w->dt)))
			return error("%s: workload dtype '%s' is not one of "
				     "the problem's", origin, dt);
	}
	p->n_work = (int)json_array_size(a);
	problem_normalize_workload(p);
	return 0;
}

static int get_tolerances(json_t *j, struct problem *p, const char *origin)
{
	json_t *tol = json_object_get(j, "tolerances");

	if (!tol)
		return 0;       /* the op's own */
	for (int d = 0; d < 3; d++) {
		json_t *t = json_object_get(tol, dtype_name((enum ak_dtype)d));

		if (!t)
			continue;
		if (!json_is_number(json_object_get(t, "atol")) ||
		    !json_is_number(json_object_get(t, "rtol")))
			return error("%s: tolerances.%s needs numbers atol and "
				     "rtol", origin, dtype_name((enum ak_dtype)d));
		p->tol[d].atol = json_number_value(json_object_get(t, "atol"));
		p->tol[d].rtol = json_number_value(json_object_get(t, "rtol"));
		if (p->tol[d].atol < 0 || p->tol[d].rtol < 0)
			return error("%s: negative tolerance", origin);
	}
	return 0;
}

/* "layout", else scalar[0] as the layout's index: one the op has */
static int get_layout(json_t *j, struct problem *p, const char *origin)
{
	json_t *l = json_object_get(j, "layout");

	if (l && !json_is_string(l))
		return error("%s: 'layout' must be a string", origin);
	if (l && problem_set_layout(p, json_string_value(l)) < 0)
		return error("%s: bad 'layout'", origin);
	if (p->op->layouts && !problem_layout(p))
		return error("%s: scalars[0] = %g is no layout of '%s'",
			     origin, p->scalar[0], p->op->name);
	return 0;
}

static int get_dtypes(json_t *j, struct problem *p, const char *origin)
{
	json_t *a = json_object_get(j, "dtypes"), *v;
	struct strbuf list = STRBUF_INIT;
	size_t i;
	int ret;

	if (!json_is_array(a) || !json_array_size(a))
		return error("%s: 'dtypes' must be a non-empty list", origin);
	json_array_foreach(a, i, v)
		strbuf_addf(&list, "%s%s", i ? "," : "",
			    json_is_string(v) ? json_string_value(v) : "?");
	ret = problem_set_dtypes(p, list.buf);
	strbuf_release(&list);
	return ret < 0 ? error("%s: bad 'dtypes'", origin) : 0;
}

int problem_parse(struct problem *p, const char *text, const char *origin)
{
	json_error_t jerr;
	json_t *j = json_loads(text, 0, &jerr), *sc;
	const struct op *op;
	const char *s;
	int ret = -1;

	if (!j)
		return error("%s:%d: malformed JSON: %s", origin, jerr.line,
			     jerr.text);
	if (!json_is_object(j)) {
		error("%s: not a JSON object", origin);
		goto cleanup;
	}
	s = json_string_value(json_object_get(j, "op"));
	if (!s) {
		error("%s: missing 'op'", origin);
		goto cleanup;
	}
	if (!(op = op_find(s))) {
		error("%s: unknown op '%s' (see 'git autokernel ops')",
		      origin, s);
		goto cleanup;
	}
	s = json_string_value(json_object_get(j, "backend"));
	if (!backend_known(s)) {
		error("%s: unknown backend '%s' (host, cuda, hip, triton)", origin,
		      s ? s : "(missing)");
		goto cleanup;
	}
	problem_default(p, op, s);
	s = json_string_value(json_object_get(j, "kernel"));
	if (s) {
		if (strchr(s, '/') || !*s || strlen(s) >= sizeof(p->kernel)) {
			error("%s: 'kernel' must be a plain file name", origin);
			goto cleanup;
		}
		snprintf(p->kernel, sizeof(p->kernel), "%s", s);
	}
	if (get_dtypes(j, p, origin) ||
	    get_shape(j, "bench_shape", &p->bench, op, origin) ||
	    get_shape(j, "smoke_shape", &p->smoke, op, origin) ||
	    get_shapes(j, "test_shapes", p->test, &p->n_test, op, origin) ||
	    get_shapes(j, "edge_shapes", p->edge, &p->n_edge, op, origin) ||
	    get_tolerances(j, p, origin) || get_workload(j, p, origin))
		goto cleanup;
	sc = json_object_get(j, "scalars");
	for (size_t i = 0; i < 4 && i < json_array_size(sc); i++)
		p->scalar[i] = json_number_value(json_array_get(sc, i));
	if (json_is_integer(json_object_get(j, "seed")))
		p->seed = json_integer_value(json_object_get(j, "seed"));
	if (get_layout(j, p, origin))
		goto cleanup;
	ret = 0;
cleanup:
	json_decref(j);
	return ret;
}

int problem_load(struct problem *p, const char *path)
{
	struct strbuf sb = STRBUF_INIT;
	int ret;

	if (strbuf_read_file(&sb, path) < 0) {
		strbuf_release(&sb);
		return error_errno("unable to read '%s'", path);
	}
	ret = problem_parse(p, sb.buf, path);
	strbuf_release(&sb);
	return ret;
}

unsigned problem_loose_tolerances(const struct problem *p, const char *path,
				  struct strbuf *out)
{
	struct strbuf line = STRBUF_INIT;
	unsigned loose = 0;

	for (int i = 0; i < p->n_dtypes; i++) {
		enum ak_dtype d = p->dtypes[i];
		const struct tolerance *t = &p->tol[d], *def = &p->op->tol[d];

		if (d > AK_F32 || (t->atol <= def->atol && t->rtol <= def->rtol))
			continue;
		loose |= 1u << d;
		strbuf_reset(&line);
		strbuf_addf(&line, "%s: the %s tolerance (atol %g, rtol %g) is "
			    "looser than %s's default (atol %g, rtol %g)", path,
			    dtype_name(d), t->atol, t->rtol, p->op->name,
			    def->atol, def->rtol);
		if (out)
			strbuf_addf(out, "%s\n", line.buf);
		else
			warning("%s", line.buf);
	}
	strbuf_release(&line);
	return loose;
}
