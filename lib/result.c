/*
 * result.c: a note read into struct result, and written from one
 * (result.h has the schema).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "lib/result.h"
#include "lib/strbuf.h"
#include "lib/usage.h"

static const char *str(json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

static double num(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_number(v) ? json_number_value(v) : 0;
}

/* One of the four numbers that may be absent: *out and its bit. */
static void read_figure(struct result *r, const char *key, double *out,
			unsigned bit)
{
	json_t *v = json_object_get(r->note, key);

	if (!json_is_number(v))
		return;
	*out = json_number_value(v);
	r->has |= bit;
}

static void read_bench(struct result_bench *b, json_t *bench)
{
	json_t *kernels = json_object_get(bench, "kernels");

	b->shape = str(bench, "shape");
	b->dtype = str(bench, "dtype");
	b->kernels = json_array_size(kernels) < 3 ?
		(int)json_array_size(kernels) : 3;
	for (int i = 0; i < b->kernels; i++)
		b->median_us[i] = num(json_array_get(kernels, i), "median_us");
	b->floor_us = num(bench, "floor_us");
	b->floor_kind = str(bench, "floor_kind");
	b->bytes = num(bench, "bytes");
	b->flops = num(bench, "flops");
}

/* The row of bench b (a workload's shape, or an old note's bench): 0, or
 * -1 when its run did not finish (a figure is missing). */
static int shape_row(struct result_shape *s, json_t *b, double weight)
{
	json_t *k = json_array_get(json_object_get(b, "kernels"), 0);

	if (!json_is_string(json_object_get(b, "shape")) ||
	    !json_is_string(json_object_get(b, "dtype")) ||
	    !json_is_number(json_object_get(b, "floor_us")) ||
	    !json_is_number(json_object_get(k, "median_us")) ||
	    !json_is_number(json_object_get(k, "roofline")))
		return -1;
	s->shape = str(b, "shape");
	s->dtype = str(b, "dtype");
	s->weight = weight;
	s->median_us = num(k, "median_us");
	s->roofline = num(k, "roofline");
	s->floor_us = num(b, "floor_us");
	return 0;
}

static void read_shapes(struct result *r)
{
	json_t *list = json_object_get(json_object_get(r->note, "workload"),
				       "shapes");
	json_t *bench = json_object_get(r->note, "bench"), *sh;
	size_t i;

	r->shapes = xcalloc(json_array_size(list) + 1, sizeof(*r->shapes));
	json_array_foreach(list, i, sh)
		if (!shape_row(&r->shapes[r->nr_shapes], sh, num(sh, "weight")))
			r->nr_shapes++;
	/* a note made before workloads: its bench, the one shape */
	if (!r->nr_shapes && json_is_object(bench) &&
	    json_object_get(bench, "shape") &&
	    !shape_row(&r->shapes[0], bench, 1.0))
		r->nr_shapes = 1;
}

static double deciding_ratio(struct result *r)
{
	const struct result_bench *b = &r->bench;
	json_t *v = json_object_get(r->note, "head_ratio");

	if (json_is_number(v) && json_number_value(v) > 0) {
		r->has |= RESULT_HAS_HEAD_RATIO;
		return json_number_value(v);
	}
	/* a note made before head_ratio: its bench's kernels 1 and 0 */
	if (b->kernels < 2 || b->median_us[0] <= 0)
		return 0;
	return b->median_us[1] / b->median_us[0];
}

static void read_views(struct result *r)
{
	json_t *n = r->note, *verify = json_object_get(n, "verify");

	r->verify_pass = json_is_object(verify) ?
		json_is_true(json_object_get(verify, "pass")) : -1;
	r->stages_passed = (int)json_integer_value(json_object_get(verify,
							"stages_passed"));
	r->device = json_object_get(n, "device");
	r->device_name = str(r->device, "name");
	r->device_arch = str(r->device, "arch");
	r->ceilings = json_object_get(n, "ceilings");
	r->dtypes = json_object_get(json_object_get(n, "problem"), "dtypes");
	r->tokens = json_object_get(n, "tokens");
	r->tokens_in = json_integer_value(json_object_get(r->tokens, "input"));
	r->tokens_out = json_integer_value(json_object_get(r->tokens,
							   "output"));
	r->torch = json_object_get(n, "torch");
	r->references = json_object_get(n, "references");
}

int result_from_note(struct result *r, json_t *note)
{
	*r = (struct result)RESULT_INIT;
	if (!note)
		return -1;
	r->note = json_incref(note);
	r->version = (int)json_integer_value(json_object_get(note, "version"));
	r->tool = str(note, "tool");
	r->name = str(note, "name");
	r->op = str(note, "op");
	r->backend = str(note, "backend");
	r->kernel_path = str(note, "kernel_path");
	r->tree = str(note, "tree");
	r->status = str(note, "status");
	if (json_is_boolean(json_object_get(note, "keep")))
		r->keep = json_is_true(json_object_get(note, "keep"));
	r->reason = str(note, "reason");
	r->verdict = str(note, "verdict");
	read_figure(r, "time_us", &r->time_us, RESULT_HAS_TIME_US);
	read_figure(r, "speedup", &r->speedup, RESULT_HAS_SPEEDUP);
	read_figure(r, "roofline", &r->roofline, RESULT_HAS_ROOFLINE);
	read_bench(&r->bench, json_object_get(note, "bench"));
	r->head_ratio = deciding_ratio(r);
	read_shapes(r);
	read_views(r);
	if (json_is_integer(json_object_get(note, "attempt")))
		r->attempt = (int)json_integer_value(json_object_get(note,
								 "attempt"));
	r->reworded = json_is_true(json_object_get(note, "reworded"));
	r->approved = json_is_true(json_object_get(note, "approved"));
	r->judged_by = str(note, "judged_by");
	return 0;
}

/* Each put_*() sets key in note to a field that is set, unless note
 * already says the same: then its bytes stay. */
static void put_string(json_t *note, const char *key, const char *s)
{
	const char *old = str(note, key);

	if (s && !(old && !strcmp(old, s)))
		json_object_set_new(note, key, json_string(s));
}

static void put_real(json_t *note, const char *key, double x, int set)
{
	json_t *old = json_object_get(note, key);

	if (!set || !isfinite(x) ||
	    (json_is_number(old) && json_number_value(old) == x))
		return;
	json_object_set_new(note, key, json_real(x));
}

static void put_int(json_t *note, const char *key, int i)
{
	json_t *old = json_object_get(note, key);

	if (i > 0 && !(json_is_integer(old) && json_integer_value(old) == i))
		json_object_set_new(note, key, json_integer(i));
}

static void put_bool(json_t *note, const char *key, int b)
{
	json_t *old = json_object_get(note, key);

	if (b >= 0 && !(json_is_boolean(old) && json_is_true(old) == b))
		json_object_set_new(note, key, json_boolean(b));
}

json_t *result_to_note(const struct result *r)
{
	json_t *n = json_is_object(r->note) ? json_copy(r->note) :
		json_object();

	put_int(n, "version", r->version);
	put_string(n, "tool", r->tool);
	put_string(n, "name", r->name);
	put_string(n, "op", r->op);
	put_string(n, "backend", r->backend);
	put_string(n, "kernel_path", r->kernel_path);
	put_string(n, "tree", r->tree);
	put_string(n, "status", r->status);
	put_bool(n, "keep", r->keep);
	put_string(n, "reason", r->reason);
	put_string(n, "verdict", r->verdict);
	put_real(n, "time_us", r->time_us, r->has & RESULT_HAS_TIME_US);
	put_real(n, "speedup", r->speedup, r->has & RESULT_HAS_SPEEDUP);
	put_real(n, "roofline", r->roofline, r->has & RESULT_HAS_ROOFLINE);
	put_real(n, "head_ratio", r->head_ratio,
		 r->has & RESULT_HAS_HEAD_RATIO);
	return n;
}

json_t *result_figure(const struct result *r, const char *key)
{
	json_t *v = json_object_get(r->note, key);

	return json_is_number(v) ? json_incref(v) : NULL;
}

void result_release(struct result *r)
{
	json_decref(r->note);
	free(r->shapes);
	*r = (struct result)RESULT_INIT;
}

const char *result_reason(const struct result *r)
{
	const char *v = r->verdict ? r->verdict : "";

	if (r->reason && !strcmp(r->reason, "slower") &&
	    (starts_with(v, "not faster") || starts_with(v, "gain ")))
		return "noise";
	return r->reason ? r->reason : "";
}

const char *result_floor_words(double roofline, const char *floor, char *buf,
			       size_t n)
{
	if (roofline > 1)
		snprintf(buf, n, "%.2fx faster than %s", roofline, floor);
	else
		snprintf(buf, n, "%.0f%% of %s", 100 * roofline, floor);
	return buf;
}
