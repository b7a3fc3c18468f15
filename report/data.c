/*
 * data.c: what a report says, read from the branch's history; and
 * the report as JSON.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/records.h"
#include "lib/repo.h"
#include "ops/dtype.h"
#include "ops/problem.h"
#include "report/report.h"

const char *const report_reason_names[REASON_NR] = {
	"build", "verify", "slower", "noise", "bench", "agent", "scope",
	"other",
};

static double num(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_number(v) ? json_number_value(v) : 0;
}

double report_time(const struct experiment *e)
{
	return e->result.time_us > 0 ? e->result.time_us : 0;
}

void report_fmt_us(char *buf, size_t n, double us)
{
	if (us <= 0)
		snprintf(buf, n, "-");
	else if (us < 100)
		snprintf(buf, n, "%.2f", us);
	else if (us < 10000)
		snprintf(buf, n, "%.1f", us);
	else
		snprintf(buf, n, "%.0f", us);
}

static enum report_reason reason_of(const struct experiment *e)
{
	const char *why = experiment_reason(e);

	for (int i = 0; i < REASON_OTHER; i++)
		if (!strcmp(why, report_reason_names[i]))
			return i;
	return REASON_OTHER;
}

/* One reference timing as {name, median_us}, or NULL if v is not one. */
static json_t *reference(const char *name, json_t *v)
{
	double us = 0;

	if (json_is_number(v))
		us = json_number_value(v);
	else if (json_is_object(v))
		us = num(v, "median_us") > 0 ? num(v, "median_us") :
			num(v, "time_us");
	if (!name || us <= 0)
		return NULL;
	return json_pack("{s:s,s:f}", "name", name, "median_us", us);
}

/* A note's "references", as an array or an object, made one shape. */
static json_t *references_of(json_t *refs)
{
	json_t *out = json_array(), *v, *one;
	const char *key;
	size_t i;

	if (json_is_array(refs)) {
		json_array_foreach(refs, i, v) {
			const char *name = json_string_value(
				json_object_get(v, "name"));

			if (!name)
				name = json_string_value(json_object_get(v,
								"label"));
			if ((one = reference(name, v)))
				json_array_append_new(out, one);
		}
	} else if (json_is_object(refs)) {
		json_object_foreach(refs, key, v)
			if ((one = reference(key, v)))
				json_array_append_new(out, one);
	}
	return out;
}

static void pick_references(struct report *r)
{
	r->references = references_of(r->best ?
				      r->best->result.references : NULL);
	/* else the newest note that has them */
	for (size_t i = r->h.nr; i-- > 0 && !json_array_size(r->references);) {
		json_decref(r->references);
		r->references = references_of(r->h.e[i].result.references);
	}
}

static void add_warning(struct report *r, const char *fmt, ...)
	AK_PRINTF(2, 3);

static void add_warning(struct report *r, const char *fmt, ...)
{
	struct strbuf sb = STRBUF_INIT;
	va_list ap;

	va_start(ap, fmt);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	json_array_append_new(r->warnings, json_string(sb.buf));
	strbuf_release(&sb);
}

void report_warn(const struct report *r)
{
	json_t *v;
	size_t i;

	json_array_foreach(r->warnings, i, v)
		warning("%s", json_string_value(v));
}

/* The tip is what a merge takes: say so when it is not the best. */
static void warn_tip(struct report *r)
{
	char tip[8], best[8];

	if (!r->best || r->best == r->tip)
		return;
	git_oid_tostr(tip, sizeof(tip), &r->tip->id);
	git_oid_tostr(best, sizeof(best), &r->best->id);
	if (r->tip_us <= 0)
		add_warning(r, "the tip %s is unverified (committed with "
			    "--no-verify): nothing measured what a merge would "
			    "take; the fastest verified commit is %s, %.2fx "
			    "over the baseline", tip, best,
			    report_speedup(r, r->best));
	else
		add_warning(r, "the tip %s, %.2fx over the baseline, is not "
			    "the fastest commit measured: %s was %.2fx", tip,
			    report_speedup(r, r->tip), best,
			    report_speedup(r, r->best));
}

static void add_tolerance(struct report *r, const struct problem *p,
			  enum ak_dtype d, int looser)
{
	const struct tolerance *t = &p->tol[d], *def = &p->op->tol[d];

	json_object_set_new(r->tolerances, dtype_name(d), json_pack(
		"{s:f,s:f,s:f,s:f,s:b}", "atol", t->atol, "rtol", t->rtol,
		"default_atol", def->atol, "default_rtol", def->rtol,
		"looser", looser));
}

/* The tolerances and, as warnings, the loose ones. */
static void add_tolerances(struct report *r, const struct problem *p,
			   const char *path)
{
	struct strbuf lines = STRBUF_INIT;
	unsigned loose = problem_loose_tolerances(p, path, &lines);
	const char *line = lines.buf;

	r->tolerances = json_object();
	for (int i = 0; i < p->n_dtypes; i++)
		if (p->dtypes[i] <= AK_F32)
			add_tolerance(r, p, p->dtypes[i],
				      !!(loose & (1u << p->dtypes[i])));
	while (*line) {
		int len = (int)strcspn(line, "\n");

		add_warning(r, "%.*s", len, line);
		line += len + (line[len] == '\n');
	}
	strbuf_release(&lines);
}

/* The bench shape and dtype of the best's run, else (notes made from
 * trailers have none) of problem.json. */
static void set_shape(struct report *r, const struct problem *p)
{
	const char *shape = r->bench.shape, *dtype = r->bench.dtype;

	if (shape && dtype) {
		snprintf(r->shape, sizeof(r->shape), "%s", shape);
		snprintf(r->dtype, sizeof(r->dtype), "%s", dtype);
	} else if (p) {
		shape_format(&p->bench, r->shape, sizeof(r->shape));
		snprintf(r->dtype, sizeof(r->dtype), "%s",
			 dtype_name(p->dtypes[0]));
	} else {
		snprintf(r->shape, sizeof(r->shape), "?");
		snprintf(r->dtype, sizeof(r->dtype), "?");
	}
}

/* What the tip's problem.json (fixed since the baseline) says: the
 * tolerances, against the op's defaults, and the bench shape. */
static void pick_problem(struct report *r)
{
	struct strbuf path = STRBUF_INIT, text = STRBUF_INIT;
	char tip[GIT_OID_HEXSZ + 1];
	struct problem p;

	git_oid_tostr(tip, sizeof(tip), &r->tip->id);
	strbuf_addf(&path, "%s/problem.json", r->h.name);
	if (!repo_read_file(&text, tip, path.buf) &&
	    !problem_parse(&p, text.buf, path.buf))
		add_tolerances(r, &p, path.buf);
	set_shape(r, r->tolerances ? &p : NULL);
	strbuf_release(&path);
	strbuf_release(&text);
}

static void count(struct report *r, const struct experiment *e, size_t i)
{
	if (e->attempt) {
		r->rejected++;
		r->reasons[reason_of(e)]++;
		return;
	}
	r->tip = e;
	if (!e->result.note)
		r->unverified++;
	else if (i)
		r->kept++;
}

int report_load(struct report *r, const char *name)
{
	snprintf(r->branch, sizeof(r->branch), "autokernel/%s", name);
	if (history_load(&r->h, name, 1) < 0)
		return -1;
	if (!r->h.nr)
		return error("no experiments on '%s'", r->branch);
	r->base = &r->h.e[0];
	r->base_us = report_time(r->base);
	for (size_t i = 0; i < r->h.nr; i++)
		count(r, &r->h.e[i], i);
	r->tip_us = report_time(r->tip);
	r->best = history_best(&r->h);
	if (r->best) {
		r->best_us = report_time(r->best);
		r->bench = r->best->result.bench;
		r->floor_us = r->bench.floor_us;
		r->torch = r->best->result.torch;
	}
	pick_references(r);
	r->warnings = json_array();
	warn_tip(r);
	pick_problem(r);
	return 0;
}

void report_release(struct report *r)
{
	history_release(&r->h);
	json_decref(r->references);
	json_decref(r->tolerances);
	json_decref(r->warnings);
	r->references = r->tolerances = r->warnings = NULL;
	r->torch = NULL;
	r->base = r->best = r->tip = NULL;
}

static int same_string(const char *a, json_t *b)
{
	return a && json_is_string(b) && !strcmp(a, json_string_value(b));
}

json_t *report_torch_at(const struct report *r, const struct result_shape *s)
{
	json_t *v;
	size_t i;

	json_array_foreach(json_object_get(r->torch, "shapes"), i, v)
		if (same_string(s->shape, json_object_get(v, "shape")) &&
		    same_string(s->dtype, json_object_get(v, "dtype")) &&
		    json_object_get(v, "eager"))
			return v;
	return NULL;
}

static json_t *shape_json(const struct result_shape *s)
{
	return json_pack("{s:s?,s:s?,s:f,s:f,s:f,s:f}", "shape", s->shape,
			 "dtype", s->dtype, "weight", s->weight, "median_us",
			 s->median_us, "roofline", s->roofline, "floor_us",
			 s->floor_us);
}

/* The shapes of the best's note, each with PyTorch's figures there. */
static json_t *shapes_json(const struct report *r)
{
	json_t *shapes = json_array(), *v, *t;
	size_t n = r->best ? r->best->result.nr_shapes : 0;

	for (size_t i = 0; i < n; i++) {
		const struct result_shape *s = &r->best->result.shapes[i];

		v = shape_json(s);
		json_array_append_new(shapes, v);
		if (!(t = report_torch_at(r, s)))
			continue;
		json_object_set_new(v, "torch_us", json_real(num(
			json_object_get(t, "eager"), "median_us")));
		if (json_object_get(t, "vs_eager"))
			json_object_set(v, "vs_torch",
					json_object_get(t, "vs_eager"));
		if (json_object_get(t, "compile"))
			json_object_set_new(v, "compile_us", json_real(num(
				json_object_get(t, "compile"), "median_us")));
		if (json_object_get(t, "vs_compile"))
			json_object_set(v, "vs_compile",
					json_object_get(t, "vs_compile"));
	}
	if (json_array_size(shapes))
		return shapes;
	json_decref(shapes);
	return json_null();
}

void report_reproduce(struct strbuf *out, const struct report *r)
{
	char *remote = history_remote(&r->h);
	char best[GIT_OID_HEXSZ + 1] = "HEAD", base[GIT_OID_HEXSZ + 1];

	if (r->best)
		git_oid_tostr(best, sizeof(best), &r->best->id);
	git_oid_tostr(base, sizeof(base), &r->base->id);
	strbuf_addf(out, "git fetch %s %s '+" NOTES_REF
		    ":refs/notes/remotes/%s/autokernel'\n", remote, r->branch,
		    remote);
	strbuf_addf(out, "git notes --ref=autokernel merge "
		    "refs/notes/remotes/%s/autokernel\n", remote);
	strbuf_addf(out, "git checkout %s\n", r->branch);
	strbuf_addf(out, "git log --notes=autokernel %.12s..%.12s\n", base,
		    best);
	strbuf_addf(out, "git autokernel verify %.12s\n", best);
	strbuf_addf(out, "git autokernel bench %.12s --against %.12s\n", best,
		    base);
	free(remote);
}

static json_t *commit_json(const struct experiment *e, double us)
{
	json_t *o = json_pack("{s:s,s:s}", "commit", git_oid_tostr_s(&e->id),
			      "hypothesis", e->subject);

	if (us > 0)
		json_object_set_new(o, "time_us", json_real(us));
	if (e->result.has & RESULT_HAS_ROOFLINE)
		json_object_set_new(o, "roofline",
				    result_figure(&e->result, "roofline"));
	return o;
}

double report_speedup(const struct report *r, const struct experiment *e)
{
	double s = e->result.speedup, us = report_time(e), ratio;

	if (!e->attempt && s > 0)
		return s;
	if (!e->attempt)
		return us > 0 && r->base_us > 0 ? r->base_us / us : 0;
	ratio = experiment_head_ratio(e);
	s = report_speedup(r, &r->h.e[e->on]);
	return ratio > 0 && s > 0 ? s * ratio : 0;
}

double report_plot_us(const struct report *r, const struct experiment *e)
{
	double ratio = e->attempt ? experiment_head_ratio(e) : 0;
	double on = e->attempt ? report_time(&r->h.e[e->on]) : 0;

	return ratio > 0 && on > 0 ? on / ratio : report_time(e);
}

static void attempt_json(json_t *o, const struct report *r,
			 const struct experiment *e)
{
	double ratio = experiment_head_ratio(e);

	json_object_set_new(o, "attempt", json_integer(e->attempt));
	json_object_set_new(o, "ref", json_string(e->ref));
	json_object_set_new(o, "reason", json_string(
		report_reason_names[reason_of(e)]));
	json_object_set_new(o, "tried_on", json_string(git_oid_tostr_s(
		&r->h.e[e->on].id)));
	if (ratio > 0)
		json_object_set_new(o, "head_ratio", json_real(ratio));
	if (report_plot_us(r, e) > 0)
		json_object_set_new(o, "plot_us",
				    json_real(report_plot_us(r, e)));
}

static json_t *experiments_json(const struct report *r)
{
	json_t *a = json_array();
	double frontier = 0;

	for (size_t i = 0; i < r->h.nr; i++) {
		const struct experiment *e = &r->h.e[i];
		double us = report_time(e), s = report_speedup(r, e);
		json_t *o = commit_json(e, us);

		json_object_set_new(o, "n", json_integer((json_int_t)i));
		json_object_set_new(o, "status", json_string(e->status));
		json_object_set_new(o, "kept", json_boolean(!e->attempt));
		if (e->attempt)
			attempt_json(o, r, e);
		if (e->result.verdict)
			json_object_set_new(o, "verdict",
					    json_string(e->result.verdict));
		if (s > 0)
			json_object_set_new(o, "speedup", json_real(s));
		if (experiment_is_kept(e) && us > 0 &&
		    (!frontier || us < frontier))
			frontier = us;
		if (frontier > 0)
			json_object_set_new(o, "best_so_far_us",
					    json_real(frontier));
		json_array_append_new(a, o);
	}
	return a;
}

static json_t *lines_json(const struct strbuf *sb)
{
	json_t *a = json_array();
	const char *p = sb->buf, *nl;

	while ((nl = strchr(p, '\n'))) {
		json_array_append_new(a, json_stringn(p, nl - p));
		p = nl + 1;
	}
	return a;
}

/* key to s, unless s is NULL */
static void set_string(json_t *o, const char *key, const char *s)
{
	if (s)
		json_object_set_new(o, key, json_string(s));
}

static json_t *summary_json(const struct report *r)
{
	const struct result *res = &(r->best ? r->best : r->base)->result;
	json_t *o = json_object();

	set_string(o, "op", res->op);
	set_string(o, "backend", res->backend);
	json_object_set_new(o, "shape", json_string(r->shape));
	json_object_set_new(o, "dtype", json_string(r->dtype));
	if (res->dtypes)
		json_object_set(o, "dtypes", res->dtypes);
	if (res->device)
		json_object_set(o, "device", res->device);
	set_string(o, "tool", res->tool);
	return o;
}

/* Where the floor is: its time, kind and bytes; null when unknown. */
static json_t *floor_json(const struct report *r)
{
	json_t *o;

	if (r->floor_us <= 0)
		return json_null();
	o = json_pack("{s:f}", "time_us", r->floor_us);
	set_string(o, "kind", r->bench.floor_kind);
	if (r->bench.bytes > 0)
		json_object_set_new(o, "bytes", json_real(r->bench.bytes));
	return o;
}

json_t *report_json(const struct report *r)
{
	json_t *o = summary_json(r), *rej = json_object(), *v;
	struct strbuf repro = STRBUF_INIT;
	int total = 0;

	json_object_set_new(o, "branch", json_string(r->branch));
	json_object_set_new(o, "name", json_string(r->h.name));
	json_object_set_new(o, "report_tool", json_string(AK_VERSION));
	json_object_set_new(o, "baseline", commit_json(r->base, r->base_us));
	if (r->best) {
		v = commit_json(r->best, r->best_us);
		json_object_set_new(v, "speedup",
				    json_real(report_speedup(r, r->best)));
		json_object_set_new(o, "best", v);
	} else {
		json_object_set_new(o, "best", json_null());
	}
	v = commit_json(r->tip, r->tip_us);
	json_object_set_new(v, "verified", json_boolean(r->tip_us > 0));
	if (report_speedup(r, r->tip) > 0)
		json_object_set_new(v, "speedup",
				    json_real(report_speedup(r, r->tip)));
	json_object_set_new(o, "tip", v);
	json_object_set(o, "warnings", r->warnings);
	json_object_set_new(o, "tolerances", r->tolerances ?
			    json_incref(r->tolerances) : json_null());
	json_object_set_new(o, "floor", floor_json(r));
	json_object_set(o, "references", r->references);
	json_object_set_new(o, "shapes", shapes_json(r));
	json_object_set_new(o, "torch", r->torch ? json_incref(r->torch) :
			    json_null());
	json_object_set_new(o, "experiments", experiments_json(r));
	json_object_set_new(o, "counts", json_pack("{s:i,s:i,s:i,s:i}",
		"experiments", (int)r->h.nr, "kept", r->kept, "rejected",
		r->rejected, "unverified", r->unverified));
	for (int i = 0; i < REASON_NR; i++) {
		json_object_set_new(rej, report_reason_names[i],
				    json_integer(r->reasons[i]));
		total += r->reasons[i];
	}
	json_object_set_new(rej, "total", json_integer(total));
	json_object_set_new(o, "rejected", rej);
	report_reproduce(&repro, r);
	json_object_set_new(o, "reproduce", lines_json(&repro));
	strbuf_release(&repro);
	return o;
}
