/*
 * cmd-log.c: `log`: the branch's experiments, one row each.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bin/builtin.h"
#include "lib/history.h"
#include "lib/repo.h"

static const char usage_log[] =
	"usage: git autokernel log [--attempts] [--json]\n"
	"\n"
	"One row per experiment on the current autokernel/* branch: commit,\n"
	"attempt, result, verdict, time, speedup over the baseline, vs best,\n"
	"% of the floor, hypothesis.  vs best is what decided: the median of\n"
	"the commit it was judged against over its own, in the same run.\n"
	"Over 100% of the floor is faster than a same-size copy, which at\n"
	"small sizes is mostly its ramp.\n"
	"--attempts includes the rejected candidates, ours and fetched ones\n"
	"(git show refs/autokernel/attempts/<name>/<attempt>).\n";

#define ROW_FMT "%4s  %-7s %-9s %-9s %-10s %10s %8s %8s %6s  %s\n"

/* The note's figure under key, as the note wrote it, when it has one. */
static void set_figure(json_t *o, const struct result *res, const char *key)
{
	json_t *v = result_figure(res, key);

	if (v)
		json_object_set_new(o, key, v);
}

static json_t *row_json(const struct experiment *e)
{
	const struct result *res = &e->result;
	json_t *r = json_pack("{s:s,s:s,s:s,s:I}", "commit",
			      git_oid_tostr_s(&e->id), "status", e->status,
			      "hypothesis", e->subject, "time", e->when);
	double ratio = experiment_head_ratio(e);

	if (e->attempt) {
		json_object_set_new(r, "attempt", json_integer(e->attempt));
		json_object_set_new(r, "ref", json_string(e->ref));
	}
	if (!res->note)
		return r;
	json_object_set_new(r, "source", json_string(e->from_trailers ?
						     "trailers" : "note"));
	if (res->verdict)
		json_object_set_new(r, "verdict", json_string(res->verdict));
	if (*experiment_reason(e))
		json_object_set_new(r, "reason",
				    json_string(experiment_reason(e)));
	set_figure(r, res, "time_us");
	set_figure(r, res, "speedup");
	if (ratio > 0)
		json_object_set_new(r, "head_ratio", json_real(ratio));
	set_figure(r, res, "roofline");
	if (res->tokens)
		json_object_set(r, "tokens", res->tokens);
	return r;
}

/* A rejection's speedup over the baseline is of its own run: the figure
 * that decided, and compares with the kept rows, is vs best. */
static void print_row(int i, const struct experiment *e)
{
	char n[16], id[8], t[16] = "-", sp[16] = "-", vs[16] = "-";
	char rf[16] = "-";
	double us = e->result.time_us, s = e->result.speedup;
	double r = e->result.roofline, ratio = experiment_head_ratio(e);

	snprintf(n, sizeof(n), "%d", i);
	git_oid_tostr(id, sizeof(id), &e->id);
	if (us > 0)
		snprintf(t, sizeof(t), us < 1000 ? "%.2f" : "%.0f", us);
	if (s > 0 && !e->attempt)
		snprintf(sp, sizeof(sp), "%.2fx", s);
	if (ratio > 0)
		snprintf(vs, sizeof(vs), "%.2fx", ratio);
	if (r > 0)
		snprintf(rf, sizeof(rf), "%.0f%%", r * 100);
	printf(ROW_FMT, n, id, e->label, e->attempt ? "rejected" : "kept",
	       e->attempt ? experiment_reason(e) : e->status, t, sp, vs, rf,
	       e->subject);
}

static void print_tokens(const struct history *h)
{
	long long in = 0, out = 0;

	for (size_t i = 0; i < h->nr; i++) {
		in += h->e[i].result.tokens_in;
		out += h->e[i].result.tokens_out;
	}
	if (in || out)
		printf("tokens: %lld in, %lld out\n", in, out);
}

int cmd_log(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "attempts", no_argument, NULL, 'a' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct history h = HISTORY_INIT;
	int attempts = 0, json = 0, opt, kept = 0, rejected = 0;
	char *name;

	while ((opt = getopt_long(argc, argv, "ah", opts, NULL)) != -1) {
		if (opt == 'a')
			attempts = 1;
		else if (opt == 'j')
			json = 1;
		else
			return usage_with(usage_log, opt == 'h');
	}
	if (optind < argc)
		return usage_with(usage_log, 0);
	name = repo_branch_name();      /* NEED_BRANCH: never NULL */
	if (history_load(&h, name, attempts) < 0) {
		free(name);
		return 3;
	}
	history_advise(&h);
	if (json) {
		json_t *a = json_array();

		for (size_t i = 0; i < h.nr; i++)
			json_array_append_new(a, row_json(&h.e[i]));
		json_dumpf(a, stdout, JSON_INDENT(2));
		putchar('\n');
		json_decref(a);
	} else {
		printf(ROW_FMT, "#", "commit", "attempt", "result", "verdict",
		       "time(us)", "speedup", "vs best", "floor",
		       "hypothesis");
		for (size_t i = 0; i < h.nr; i++) {
			print_row((int)i, &h.e[i]);
			if (h.e[i].attempt)
				rejected++;
			else
				kept++;
		}
		printf("autokernel/%s: %d kept%s", name, kept,
		       attempts ? "" : " (--attempts shows the rejected)");
		if (attempts)
			printf(", %d rejected", rejected);
		printf("\n");
		print_tokens(&h);
	}
	history_release(&h);
	free(name);
	return 0;
}
