/*
 * report-data.c: what a report says, read from the branch's history; and
 * the report as JSON.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/records.h"
#include "lib/repo.h"
#include "report/report.h"

const char *const report_reason_names[REASON_NR] = {
	"build", "verify", "slower", "bench", "agent", "scope", "other",
};

static double num(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_number(v) ? json_number_value(v) : 0;
}

double report_time(const struct experiment *e)
{
	double us = num(e->note, "time_us");

	return us > 0 ? us : 0;
}

int report_is_kept(const struct experiment *e)
{
	return !e->attempt && e->note && (!strcmp(e->status, "baseline") ||
					  !strcmp(e->status, "kept"));
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
static json_t *references_of(json_t *note)
{
	json_t *refs = json_object_get(note, "references");
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
	r->references = references_of(r->best ? r->best->note : NULL);
	/* else the newest note that has them */
	for (size_t i = r->h.nr; i-- > 0 && !json_array_size(r->references);) {
		json_decref(r->references);
		r->references = references_of(r->h.e[i].note);
	}
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
	for (size_t i = 0; i < r->h.nr; i++) {
		const struct experiment *e = &r->h.e[i];
		double us = report_time(e);

		if (e->attempt) {
			r->rejected++;
			r->reasons[reason_of(e)]++;
			continue;
		}
		if (!e->note)
			r->unverified++;
		else if (i)
			r->kept++;
		if (report_is_kept(e) && us > 0 &&
		    (!r->best || us < r->best_us)) {
			r->best = e;
			r->best_us = us;
		}
	}
	if (r->best) {
		r->bench = json_object_get(r->best->note, "bench");
		r->floor_us = num(r->bench, "floor_us");
	}
	pick_references(r);
	return 0;
}

void report_release(struct report *r)
{
	history_release(&r->h);
	json_decref(r->references);
	r->references = NULL;
	r->base = r->best = NULL;
}

/* The remote the branch came from, for the reviewer's commands. */
static char *remote_name(const struct report *r)
{
	struct strbuf key = STRBUF_INIT;
	char *remote;

	strbuf_addf(&key, "branch.%s.remote", r->branch);
	remote = config_string(key.buf, "origin");
	strbuf_release(&key);
	return remote;
}

void report_reproduce(struct strbuf *out, const struct report *r)
{
	char *remote = remote_name(r);
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
	if (json_is_number(json_object_get(e->note, "roofline")))
		json_object_set(o, "roofline",
				json_object_get(e->note, "roofline"));
	return o;
}

double report_speedup(const struct report *r, const struct experiment *e)
{
	double s = num(e->note, "speedup"), us = report_time(e);

	if (s > 0 && !e->attempt)
		return s;
	return us > 0 && r->base_us > 0 ? r->base_us / us : 0;
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
		if (e->attempt) {
			json_object_set_new(o, "attempt",
					    json_integer(e->attempt));
			json_object_set_new(o, "reason", json_string(
				report_reason_names[reason_of(e)]));
		}
		if (json_is_string(json_object_get(e->note, "verdict")))
			json_object_set(o, "verdict",
					json_object_get(e->note, "verdict"));
		if (s > 0)
			json_object_set_new(o, "speedup", json_real(s));
		if (report_is_kept(e) && us > 0 && (!frontier || us < frontier))
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

static json_t *summary_json(const struct report *r)
{
	json_t *note = r->best ? r->best->note : r->base->note;
	json_t *problem = json_object_get(note, "problem");
	json_t *o = json_object();

	json_object_set(o, "op", json_object_get(note, "op"));
	json_object_set(o, "backend", json_object_get(note, "backend"));
	json_object_set(o, "shape", json_object_get(r->bench, "shape"));
	json_object_set(o, "dtype", json_object_get(r->bench, "dtype"));
	json_object_set(o, "dtypes", json_object_get(problem, "dtypes"));
	json_object_set(o, "device", json_object_get(note, "device"));
	json_object_set(o, "tool", json_object_get(note, "tool"));
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
	json_object_set_new(o, "floor", r->floor_us > 0 ? json_pack(
		"{s:f,s:O*,s:O*}", "time_us", r->floor_us, "kind",
		json_object_get(r->bench, "floor_kind"), "bytes",
		json_object_get(r->bench, "bytes")) : json_null());
	json_object_set(o, "references", r->references);
	v = r->best ? json_object_get(r->best->note, "shapes") : NULL;
	json_object_set_new(o, "shapes", json_is_array(v) ? json_incref(v) :
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
