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
	free(copy);
	return ret;
}

static json_t *shape_json(const struct shape *s)
{
	char buf[128];

	shape_format(s, buf, sizeof(buf));
	return json_string(buf);
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
	    get_tolerances(j, p, origin))
		goto cleanup;
	sc = json_object_get(j, "scalars");
	for (size_t i = 0; i < 4 && i < json_array_size(sc); i++)
		p->scalar[i] = json_number_value(json_array_get(sc, i));
	if (json_is_integer(json_object_get(j, "seed")))
		p->seed = json_integer_value(json_object_get(j, "seed"));
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
