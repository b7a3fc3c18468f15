/*
 * report.h: a branch's experiments as a pull-request body.  report_load()
 * reads the history (kept commits and attempts, oldest first) and picks
 * out the baseline, the tip (what a merge of the branch takes), the best
 * kept commit and the floor, the tolerances the branch was judged with,
 * and what a reviewer must be warned of; the renderers write it as
 * markdown, as a standalone SVG progress plot, or as JSON.
 *
 *	struct report r = REPORT_INIT;
 *	if (report_load(&r, "softmax") < 0)
 *		return 3;
 *	report_warn(&r);                        // r.warnings on stderr
 *	report_md(&md, &r, "report.svg");       // NULL: no plot to embed
 *	report_svg(&svg, &r);
 *	json_t *j = report_json(&r);            // the caller's reference
 *	report_release(&r);
 *
 * Everything comes from git: commit messages, and the notes of kept
 * commits and attempts, read as struct result (lib/result.h has their
 * schema).  Two objects of a note are read here as they are, when
 * present: "references", timings of other implementations ([{name,
 * median_us}] or {name: us}), and "torch", PyTorch's own op timed beside
 * the kernel by `bench --torch --record` ({torch, device, no_compile,
 * shapes: [{shape, dtype, kernel_us, eager, compile, vs_eager,
 * vs_compile}]}).
 */
#ifndef REPORT_H
#define REPORT_H

#include <jansson.h>
#include "lib/history.h"
#include "lib/strbuf.h"

/* Why attempts were rejected, in the order the report lists them. */
enum report_reason {
	REASON_BUILD, REASON_VERIFY, REASON_SLOWER, REASON_NOISE, REASON_BENCH,
	REASON_AGENT, REASON_SCOPE, REASON_OTHER, REASON_NR
};
extern const char *const report_reason_names[REASON_NR];

struct report {
	struct history h;       /* every experiment, oldest first */
	char branch[300];
	const struct experiment *base;  /* h.e[0], the baseline */
	const struct experiment *best;  /* history_best(): the fastest
					 * measured kept commit */
	const struct experiment *tip;   /* HEAD, the newest commit */
	double base_us, best_us, tip_us;        /* 0 when not measured */
	struct result_bench bench;      /* the best's; zeros when none */
	char shape[64], dtype[8];       /* the bench's, "?" when unknown */
	double floor_us;        /* from the best's run; 0 when unknown */
	json_t *references;     /* [{name, median_us}], owned */
	json_t *torch;          /* the best's note's "torch" (borrowed) */
	/* {dtype: {atol, rtol, default_atol, default_rtol, looser}} of the
	 * tip's problem.json for its dtypes; owned, NULL if unreadable */
	json_t *tolerances;
	json_t *warnings;       /* [text], one line each, owned */
	int kept, rejected, unverified;
	int reasons[REASON_NR];
};
#define REPORT_INIT { .h = HISTORY_INIT }

/* 0, or -1 after an error (not an experiment branch, no baseline). */
int report_load(struct report *r, const char *name);
void report_release(struct report *r);

/* An experiment's median time in us, or 0 when it has none. */
double report_time(const struct experiment *e);
/* Over the baseline: a kept commit's own (timed interleaved with the
 * baseline); an attempt's, that of the commit it was tried on times the
 * same-run ratio that decided (experiment_head_ratio()), so that it
 * compares with the kept ones; 0 when unknown. */
double report_speedup(const struct report *r, const struct experiment *e);
/* Where e goes on the plot's time axis: a kept commit's median; an
 * attempt's, the time of the commit it was tried on over the ratio that
 * decided, else its own median; 0 when it has none. */
double report_plot_us(const struct report *r, const struct experiment *e);
/* Times of 1 us to 1 s, short: "17.8", "4751.8", "12345". */
void report_fmt_us(char *buf, size_t n, double us);

/* Each of r->warnings as "warning: ..." on stderr. */
void report_warn(const struct report *r);

/* PyTorch's figures in r->torch at the shape and dtype of s, or NULL. */
json_t *report_torch_at(const struct report *r, const struct result_shape *s);

/* The commands a reviewer runs to reproduce the result, one a line. */
void report_reproduce(struct strbuf *out, const struct report *r);

/* svg: the relative path of the plot to embed, or NULL. */
void report_md(struct strbuf *out, const struct report *r, const char *svg);
void report_svg(struct strbuf *out, const struct report *r);
json_t *report_json(const struct report *r);

#endif
