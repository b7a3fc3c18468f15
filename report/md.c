/*
 * md.c: the report as a pull-request body in GitHub markdown.
 */
#include <stdio.h>
#include <string.h>
#include "lib/history.h"
#include "report/report.h"

static double num(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_number(v) ? json_number_value(v) : 0;
}

static const char *or_unknown(const char *s)
{
	return s ? s : "?";
}

static const char *str(json_t *o, const char *key)
{
	return or_unknown(json_string_value(json_object_get(o, key)));
}

/* Text for a table cell: no pipes, no HTML, one line. */
static void add_cell(struct strbuf *sb, const char *s)
{
	for (; s && *s; s++) {
		if (*s == '|')
			strbuf_addstr(sb, "\\|");
		else if (*s == '<')
			strbuf_addstr(sb, "&lt;");
		else if (*s == '\n' || *s == '\r')
			strbuf_addch(sb, ' ');
		else
			strbuf_addch(sb, *s);
	}
}

static void add_pct(struct strbuf *sb, double frac)
{
	if (frac > 0)
		strbuf_addf(sb, frac < 0.1 ? "%.1f%%" : "%.0f%%", 100 * frac);
	else
		strbuf_addch(sb, '-');
}

static void add_device(struct strbuf *sb, json_t *dev, const char *backend)
{
	static const struct { const char *key, *fmt; } parts[] = {
		{ "arch", "%s" }, { "sms", "%lld SMs" },
		{ "cores", "%lld cores" },
		{ "driver", "driver %s" },
		{ "driver_version", "driver %lld" },
		{ "runtime_version", "runtime %lld" },
	};

	add_cell(sb, str(dev, "name"));
	strbuf_addf(sb, " (%s", backend);
	for (size_t i = 0; i < ARRAY_SIZE(parts); i++) {
		json_t *v = json_object_get(dev, parts[i].key);
		struct strbuf one = STRBUF_INIT;

		if (json_is_string(v))
			strbuf_addf(&one, parts[i].fmt, json_string_value(v));
		else if (json_is_integer(v))
			strbuf_addf(&one, parts[i].fmt,
				    (long long)json_integer_value(v));
		if (one.len) {
			strbuf_addstr(sb, ", ");
			add_cell(sb, one.buf);
		}
		strbuf_release(&one);
	}
	strbuf_addch(sb, ')');
}

/* From the note's problem, else (a note made from trailers) from the
 * tip's problem.json. */
static void add_dtypes(struct strbuf *sb, const struct report *r,
		       json_t *dtypes)
{
	const char *dt;
	json_t *v;
	size_t i;

	json_array_foreach(dtypes, i, v)
		strbuf_addf(sb, "%s%s", i ? ", " : "", json_string_value(v));
	if (json_array_size(dtypes))
		return;
	i = 0;
	json_object_foreach(r->tolerances, dt, v)
		strbuf_addf(sb, "%s%s", i++ ? ", " : "", dt);
}

/* What the headline says of the tip, after the op. */
static void tip_figure(struct strbuf *sb, const struct report *r)
{
	double s = report_speedup(r, r->tip);

	if (r->tip != r->base && r->tip_us > 0 && s > 1)
		strbuf_addf(sb, " %.2fx faster", s);
	else if (r->tip_us <= 0)
		strbuf_addstr(sb, ", the tip unverified,");
	else
		strbuf_addstr(sb, ", no faster than the baseline yet,");
}

static void add_warnings(struct strbuf *sb, const struct report *r)
{
	json_t *v;
	size_t i;

	json_array_foreach(r->warnings, i, v) {
		strbuf_addstr(sb, "> **Warning:** ");
		add_cell(sb, json_string_value(v));
		strbuf_addstr(sb, "\n>\n");
	}
	if (json_array_size(r->warnings)) {
		strbuf_setlen(sb, sb->len - 2);
		strbuf_addch(sb, '\n');
	}
}

/* The tip leads: a merge of the branch takes the tip, not the best. */
static void headline(struct strbuf *sb, const struct report *r,
		     const struct result *res)
{
	char a[32], b[32];

	report_fmt_us(a, sizeof(a), r->base_us);
	report_fmt_us(b, sizeof(b), r->tip_us);
	strbuf_addf(sb, "## %s: ", r->branch);
	add_cell(sb, or_unknown(res->op));
	tip_figure(sb, r);
	strbuf_addstr(sb, " on ");
	add_cell(sb, or_unknown(res->device_name));
	strbuf_addf(sb, "\n\n**%s us -> %s us** at %s %s (the tip, `%.7s`)", a,
		    r->tip_us > 0 ? b : "?", r->shape, r->dtype,
		    git_oid_tostr_s(&r->tip->id));
	if (r->floor_us > 0 && r->tip_us > 0) {
		strbuf_addstr(sb, ", ");
		add_pct(sb, r->floor_us / r->tip_us);
		strbuf_addstr(sb, " of the floor");
	}
	strbuf_addf(sb, ".  %zu experiment%s: %d kept, %d rejected",
		    r->h.nr - 1, r->h.nr == 2 ? "" : "s", r->kept, r->rejected);
	if (r->unverified)
		strbuf_addf(sb, ", %d unverified (committed with "
			    "--no-verify)", r->unverified);
	strbuf_addstr(sb, ".\n\n");
	add_warnings(sb, r);
}

static void add_tolerances(struct strbuf *sb, const struct report *r)
{
	const char *dt;
	json_t *v;
	int first = 1;

	if (!r->tolerances) {
		strbuf_addch(sb, '?');
		return;
	}
	json_object_foreach(r->tolerances, dt, v) {
		strbuf_addf(sb, "%s%s atol %g rtol %g", first ? "" : "; ", dt,
			    num(v, "atol"), num(v, "rtol"));
		if (json_is_true(json_object_get(v, "looser")))
			strbuf_addf(sb, " (**looser** than the op's atol %g "
				    "rtol %g)", num(v, "default_atol"),
				    num(v, "default_rtol"));
		first = 0;
	}
}

static void summary(struct strbuf *sb, const struct report *r,
		    const struct result *res)
{
	strbuf_addstr(sb, "| | |\n|---|---|\n| op | ");
	add_cell(sb, or_unknown(res->op));
	strbuf_addf(sb, " |\n| bench shape | %s %s |\n| dtypes verified | ",
		    r->shape, r->dtype);
	add_dtypes(sb, r, res->dtypes);
	strbuf_addstr(sb, " |\n| tolerances (atol + rtol * \\|ref\\|) | ");
	add_tolerances(sb, r);
	strbuf_addstr(sb, " |\n| device | ");
	add_device(sb, res->device, or_unknown(res->backend));
	strbuf_addstr(sb, " |\n| verification of the best | ");
	if (res->verify_pass >= 0)
		strbuf_addf(sb, "%s %d/5 |\n", res->verify_pass ? "pass" :
			    "FAIL", res->stages_passed);
	else
		strbuf_addstr(sb, "- |\n");
	strbuf_addstr(sb, "| tool | git-autokernel ");
	add_cell(sb, or_unknown(res->tool));
	if (strcmp(or_unknown(res->tool), AK_VERSION))
		strbuf_addf(sb, " (report by %s)", AK_VERSION);
	strbuf_addstr(sb, " |\n\n");
}

static void result_row(struct strbuf *sb, const char *what,
		       const struct experiment *e, double us, double speedup,
		       double roofline)
{
	char t[32];

	report_fmt_us(t, sizeof(t), us);
	strbuf_addf(sb, "| %s | ", what);
	if (e)
		strbuf_addf(sb, "`%.7s`", git_oid_tostr_s(&e->id));
	strbuf_addf(sb, " | %s | ", t);
	if (speedup > 0)
		strbuf_addf(sb, "%.2fx", speedup);
	strbuf_addstr(sb, " | ");
	add_pct(sb, roofline);
	strbuf_addstr(sb, " |\n");
}

static void results(struct strbuf *sb, const struct report *r)
{
	size_t i;
	json_t *v;

	strbuf_addstr(sb, "### Baseline, best and floor\n\n"
		      "| | commit | time (us) | speedup | % of floor |\n"
		      "|---|---|--:|--:|--:|\n");
	result_row(sb, "baseline", r->base, r->base_us, 1,
		   r->base->result.roofline);
	if (r->tip != r->best)
		result_row(sb, r->tip_us > 0 ? "**tip** (what merges)" :
			   "**tip** (what merges), unverified", r->tip,
			   r->tip_us, report_speedup(r, r->tip),
			   r->tip->result.roofline);
	if (r->best)
		result_row(sb, "**best**", r->best, r->best_us,
			   report_speedup(r, r->best),
			   r->best->result.roofline);
	if (r->floor_us > 0) {
		struct strbuf what = STRBUF_INIT;

		strbuf_addf(&what, "floor: %s",
			    or_unknown(r->bench.floor_kind));
		if (r->bench.bytes > 0)
			strbuf_addf(&what, " of %.1f MB", r->bench.bytes / 1e6);
		result_row(sb, what.buf, NULL, r->floor_us, 0, 1);
		strbuf_release(&what);
	}
	json_array_foreach(r->references, i, v) {
		struct strbuf what = STRBUF_INIT;
		double us = num(v, "median_us");

		strbuf_addstr(&what, "reference: ");
		add_cell(&what, str(v, "name"));
		result_row(sb, what.buf, NULL, us, r->base_us / us,
			   r->floor_us / us);
		strbuf_release(&what);
	}
	strbuf_addstr(sb, "\nSpeedups are over the baseline; % of floor is the "
		      "floor's time over the kernel's (100% is the speed of "
		      "light).  Times are medians, measured interleaved with "
		      "the commit they replaced.\n\n");
}

static int same(const char *a, const char *b)
{
	return a && b && !strcmp(a, b);
}

/* res's median at want's shape and dtype, 0 when it has none. */
static double median_at(const struct result *res,
			const struct result_shape *want)
{
	for (size_t i = 0; i < res->nr_shapes; i++)
		if (same(res->shapes[i].shape, want->shape) &&
		    same(res->shapes[i].dtype, want->dtype))
			return res->shapes[i].median_us;
	return 0;
}

/* PyTorch's pairs of columns: 2 when a shape of the best's note has a
 * torch.compile figure, 1 when only eager ones, 0 when none. */
static int torch_columns(const struct report *r, const struct result *best)
{
	int cols = 0;
	json_t *t;

	for (size_t i = 0; i < best->nr_shapes; i++) {
		if (!(t = report_torch_at(r, &best->shapes[i])))
			continue;
		if (json_object_get(t, "compile"))
			return 2;
		cols = 1;
	}
	return cols;
}

static void add_ratio(struct strbuf *sb, json_t *t, const char *key)
{
	if (num(t, key) > 0)
		strbuf_addf(sb, "%.2fx", num(t, key));
	strbuf_addstr(sb, " | ");
}

/* PyTorch's cells of a row: its time and the ratio, of eager (and
 * torch.compile); empty where it has no figure. */
static void torch_cells(struct strbuf *sb, const struct report *r,
			const struct result_shape *row, int cols)
{
	json_t *t = report_torch_at(r, row);
	char us[32];

	for (int k = 0; k < cols; k++) {
		const char *what = k ? "compile" : "eager";

		report_fmt_us(us, sizeof(us), num(json_object_get(t, what),
						  "median_us"));
		strbuf_addf(sb, "%s | ", t ? us : "");
		add_ratio(sb, t, k ? "vs_compile" : "vs_eager");
	}
}

static void per_shape_head(struct strbuf *sb, int cols)
{
	strbuf_addstr(sb, "| shape | dtype | weight | time (us) | baseline "
		      "(us) | speedup | % of floor |");
	if (cols > 0)
		strbuf_addstr(sb, " PyTorch (us) | vs PyTorch |");
	if (cols > 1)
		strbuf_addstr(sb, " torch.compile (us) | vs compile |");
	strbuf_addstr(sb, "\n|---|---|--:|--:|--:|--:|--:|");
	for (int k = 0; k < cols; k++)
		strbuf_addstr(sb, "--:|--:|");
	strbuf_addch(sb, '\n');
}

/* Where PyTorch's figures come from, under the table. */
static void torch_note(struct strbuf *sb, const struct report *r, int cols)
{
	const char *no = json_string_value(json_object_get(r->torch,
							    "no_compile"));

	if (cols <= 0)
		return;
	strbuf_addstr(sb, "\nPyTorch is its own op (python/torch_ref/) in "
		      "torch ");
	add_cell(sb, str(r->torch, "torch"));
	strbuf_addstr(sb, ", timed by `git autokernel bench --torch` in the "
		      "same run as the kernel and under the same rules (fresh "
		      "inputs for every call, every output checked); vs "
		      "PyTorch is PyTorch's time over the kernel's in that run "
		      "(above 1: the kernel is faster).");
	if (cols < 2 && no) {
		strbuf_addstr(sb, "  No torch.compile: ");
		add_cell(sb, no);
		strbuf_addch(sb, '.');
	}
	strbuf_addch(sb, '\n');
}

static void shape_row(struct strbuf *sb, const struct report *r,
		      const struct result_shape *v, int cols)
{
	char t[32], bt[32];
	double bus = median_at(&r->base->result, v);

	report_fmt_us(t, sizeof(t), v->median_us);
	report_fmt_us(bt, sizeof(bt), bus);
	strbuf_addstr(sb, "| ");
	add_cell(sb, or_unknown(v->shape));
	strbuf_addstr(sb, " | ");
	add_cell(sb, or_unknown(v->dtype));
	strbuf_addf(sb, " | %.2f | %s | %s | ", v->weight, t, bt);
	if (v->median_us > 0 && bus > 0)
		strbuf_addf(sb, "%.2fx", bus / v->median_us);
	strbuf_addstr(sb, " | ");
	add_pct(sb, v->roofline);
	strbuf_addstr(sb, " | ");
	torch_cells(sb, r, v, cols);
	strbuf_setlen(sb, sb->len - 1);
	strbuf_addch(sb, '\n');
}

static void per_shape(struct strbuf *sb, const struct report *r)
{
	static const struct result none = RESULT_INIT;
	const struct result *best = r->best ? &r->best->result : &none;
	int cols = torch_columns(r, best);

	strbuf_addstr(sb, "### Per shape\n\n");
	if (!best->nr_shapes) {
		strbuf_addf(sb, "The best kernel's note has no per-shape "
			    "timings; `git autokernel bench %.12s "
			    "--all-shapes` measures them.\n\n",
			    r->best ? git_oid_tostr_s(&r->best->id) : "HEAD");
		return;
	}
	per_shape_head(sb, cols);
	for (size_t i = 0; i < best->nr_shapes; i++)
		shape_row(sb, r, &best->shapes[i], cols);
	if (best->nr_shapes > 1)
		strbuf_addstr(sb, "\nThe kernel's time above is the weighted "
			      "total over these shapes (the model's time in "
			      "the op).\n");
	torch_note(sb, r, cols);
	strbuf_addch(sb, '\n');
}

static void kept_table(struct strbuf *sb, const struct report *r)
{
	strbuf_addstr(sb, "### Kept experiments\n\n"
		      "| # | commit | time (us) | speedup | vs best | "
		      "% of floor | hypothesis |\n|--:|---|--:|--:|--:|--:|"
		      "---|\n");
	for (size_t i = 0; i < r->h.nr; i++) {
		const struct experiment *e = &r->h.e[i];
		double us = report_time(e), s = report_speedup(r, e);
		double ratio = experiment_head_ratio(e);
		char t[32];

		if (e->attempt)
			continue;
		report_fmt_us(t, sizeof(t), us);
		strbuf_addf(sb, "| %zu | `%.7s` | %s | ", i,
			    git_oid_tostr_s(&e->id), e->result.note ? t :
			    "unverified");
		if (s > 0)
			strbuf_addf(sb, "%.2fx", s);
		strbuf_addstr(sb, " | ");
		if (ratio > 0)
			strbuf_addf(sb, "%.2fx", ratio);
		strbuf_addstr(sb, " | ");
		add_pct(sb, e->result.roofline);
		strbuf_addstr(sb, " | ");
		add_cell(sb, e->subject);
		strbuf_addstr(sb, " |\n");
	}
	strbuf_addstr(sb, "\nvs best is what decided: the time of the commit "
		      "it was judged against over its own, timed in the same "
		      "run.\n\n");
}

static void rejected_table(struct strbuf *sb, const struct report *r)
{
	strbuf_addf(sb, "### Rejected attempts\n\n%d candidates were rejected "
		    "and saved under `refs/autokernel/attempts/%s/` "
		    "(`git autokernel log --attempts` lists them with their "
		    "numbers and the same-run ratio that decided).\n\n",
		    r->rejected, r->h.name);
	strbuf_addstr(sb, "| reason |");
	for (int i = 0; i < REASON_NR; i++)
		if (i != REASON_OTHER || r->reasons[i])
			strbuf_addf(sb, " %s |", report_reason_names[i]);
	strbuf_addstr(sb, " total |\n|---|");
	for (int i = 0; i < REASON_NR; i++)
		if (i != REASON_OTHER || r->reasons[i])
			strbuf_addstr(sb, "--:|");
	strbuf_addstr(sb, "--:|\n| attempts |");
	for (int i = 0; i < REASON_NR; i++)
		if (i != REASON_OTHER || r->reasons[i])
			strbuf_addf(sb, " %d |", r->reasons[i]);
	strbuf_addf(sb, " %d |\n\n", r->rejected);
}

void report_md(struct strbuf *sb, const struct report *r, const char *svg)
{
	const struct result *res = &(r->best ? r->best : r->base)->result;

	headline(sb, r, res);
	summary(sb, r, res);
	results(sb, r);
	if (svg)
		strbuf_addf(sb, "![time per experiment: kept, rejected, best "
			    "so far, baseline and floor](%s)\n\n", svg);
	else
		strbuf_addstr(sb, "The progress plot: `git autokernel report "
			      "-o report.md` writes report.svg beside it.\n\n");
	per_shape(sb, r);
	kept_table(sb, r);
	rejected_table(sb, r);
	strbuf_addstr(sb, "### Reproduce\n\n"
		      "The results are git notes (`refs/notes/autokernel`) "
		      "on each commit; see doc/sharing.md.\n\n```sh\n");
	report_reproduce(sb, r);
	strbuf_addstr(sb, "```\n");
}
