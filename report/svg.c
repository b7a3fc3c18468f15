/*
 * svg.c: the progress plot.  x is the experiment number (0 the
 * baseline), y the median time (log scale when the times span more than
 * 10x); kept commits are filled dots, slower attempts hollow ones,
 * attempts without a time (build, verify) crosses in a band at the top.
 * An attempt is drawn where the ratio that decided puts it: the time of
 * the commit it was tried on over that ratio (report_plot_us()), not at
 * its own run's time, which another run's load may have made look faster
 * than the best.
 * The best so far is a step line (id "frontier"); the baseline and the
 * floor are labelled horizontal lines.  With a workload of several
 * shapes, each shape has a thin line of its own (id "shape-K") through
 * the kept commits' medians at it, labelled with the shape at its end.  Standalone SVG 1.1, no external
 * resources, so it renders the same in a browser, a PR and an editor.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "report/report.h"

#define W 760
#define H 440
#define L 84            /* plot box */
#define R (W - 24)
#define T 70
#define B (H - 70)
#define BAND (T + 10)   /* attempts without a time */
#define DT (T + 26)     /* where data may go */
#define DB (B - 8)

#define C_KEPT "#1f6fb4"
#define C_REJ "#d62728"
#define C_BEST "#2ca02c"

struct scale {
	int log;
	double lo, hi;          /* y range, log10 of it on a log scale */
	double xlo, xhi;
};

/* Text for XML: escaped, control characters dropped, bytes that are not
 * UTF-8 replaced, at most max bytes of input. */
static void add_text(struct strbuf *sb, const char *s, size_t max)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = 0;

	for (; p && *p && n < max; p++, n++) {
		int len = *p < 0x80 ? 1 : (*p >> 5) == 6 ? 2 :
			(*p >> 4) == 14 ? 3 : (*p >> 3) == 30 ? 4 : 0;
		int ok = len > 0;

		for (int k = 1; ok && k < len; k++)
			ok = (p[k] & 0xc0) == 0x80;
		if (len > 1 && ok) {
			strbuf_add(sb, p, len);
			p += len - 1;
			n += len - 1;
			continue;
		}
		if (!ok)
			strbuf_addch(sb, '?');
		else if (*p == '&')
			strbuf_addstr(sb, "&amp;");
		else if (*p == '<')
			strbuf_addstr(sb, "&lt;");
		else if (*p == '>')
			strbuf_addstr(sb, "&gt;");
		else if (*p == '"')
			strbuf_addstr(sb, "&quot;");
		else if (*p >= 0x20 || *p == '\t')
			strbuf_addch(sb, *p);
	}
	if (p && *p)
		strbuf_addstr(sb, "...");
}

static double ymap(const struct scale *s, double us)
{
	double v = s->log ? log10(us) : us;

	return DB - (v - s->lo) / (s->hi - s->lo) * (DB - DT);
}

static double xmap(const struct scale *s, double n)
{
	return L + (n - s->xlo) / (s->xhi - s->xlo) * (R - L);
}

static void widen(double *lo, double *hi, double us)
{
	if (us <= 0)
		return;
	if (!*lo || us < *lo)
		*lo = us;
	if (us > *hi)
		*hi = us;
}

/* e's median at shape/dtype from its note's shapes; 0 when not timed. */
static double shape_us(const struct experiment *e, const char *shape,
		       const char *dtype)
{
	double us = 0;

	for (size_t i = 0; i < e->result.nr_shapes; i++) {
		const struct result_shape *x = &e->result.shapes[i];

		if (x->shape && !strcmp(x->shape, shape) && (!x->dtype ||
		    !dtype || !strcmp(x->dtype, dtype)))
			us = x->median_us;
	}
	return us;
}

/* The workload (the best's note, else the baseline's) when it has
 * several shapes, else NULL. */
static const struct result *plot_shapes(const struct report *r)
{
	const struct result *res = &(r->best ? r->best : r->base)->result;

	return res->nr_shapes > 1 ? res : NULL;
}

/* 0 when nothing has a time. */
static int make_scale(struct scale *s, const struct report *r)
{
	const struct result *v = plot_shapes(r);
	double lo = 0, hi = 0, pad;

	for (size_t i = 0; i < r->h.nr; i++)
		widen(&lo, &hi, report_plot_us(r, &r->h.e[i]));
	widen(&lo, &hi, r->base_us);
	widen(&lo, &hi, r->floor_us);
	for (size_t k = 0; v && k < v->nr_shapes; k++)
		for (size_t i = 0; i < r->h.nr; i++)
			if (experiment_is_kept(&r->h.e[i]))
				widen(&lo, &hi, shape_us(&r->h.e[i],
					v->shapes[k].shape,
					v->shapes[k].dtype));
	s->xlo = -0.5;
	s->xhi = r->h.nr > 1 ? r->h.nr - 0.5 : 0.5;
	if (!hi)
		return 0;
	s->log = hi / lo > 10;
	if (s->log) {
		lo = log10(lo);
		hi = log10(hi);
	}
	pad = (hi - lo) * 0.06;
	if (pad <= 0)
		pad = s->log ? 0.05 : hi * 0.1;
	s->lo = lo - pad;
	s->hi = hi + pad;
	if (!s->log && s->lo < 0)
		s->lo = 0;
	return 1;
}

/* 1, 2 or 5 times a power of ten, near x. */
static double nice(double x)
{
	double m = pow(10, floor(log10(x))), f = x / m;

	return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * m;
}

static void tick_y(struct strbuf *sb, const struct scale *s, double us)
{
	double y = ymap(s, us);

	strbuf_addf(sb, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" "
		    "stroke=\"#e4e4e4\"/>\n", L, y, R, y);
	strbuf_addf(sb, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">"
		    "%.7g</text>\n", L - 6, y + 4, us);
}

static void y_ticks(struct strbuf *sb, const struct scale *s)
{
	if (s->log) {
		int decades = (int)ceil(s->hi) - (int)floor(s->lo);

		for (int k = (int)floor(s->lo); k <= (int)ceil(s->hi); k++)
			for (int m = 1; m <= 5; m++) {
				double v = m * pow(10, k);

				if ((m == 1 || (decades < 3 && (m == 2 ||
				     m == 5))) && log10(v) >= s->lo &&
				    log10(v) <= s->hi)
					tick_y(sb, s, v);
			}
		return;
	}
	double step = nice((s->hi - s->lo) / 5);

	for (double v = ceil(s->lo / step) * step; v <= s->hi; v += step)
		tick_y(sb, s, v);
}

static void x_ticks(struct strbuf *sb, const struct scale *s, size_t n)
{
	double step = n > 12 ? nice(n / 10.0) : 1;

	if (step < 1)
		step = 1;
	for (double v = 0; v < n; v += step)
		strbuf_addf(sb, "<text x=\"%.1f\" y=\"%d\" "
			    "text-anchor=\"middle\">%.0f</text>\n",
			    xmap(s, v), B + 18, v);
}

static void hline(struct strbuf *sb, const struct scale *s, const char *id,
		  double us, const char *label, const char *dash, int below)
{
	char t[32];
	double y = ymap(s, us);

	report_fmt_us(t, sizeof(t), us);
	strbuf_addf(sb, "<g id=\"%s\"><line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" "
		    "y2=\"%.1f\" stroke=\"#555\" stroke-width=\"1.2\" "
		    "stroke-dasharray=\"%s\"/>", id, L, y, R, y, dash);
	strbuf_addf(sb, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" "
		    "fill=\"#333\">", R - 4, below ? y + 14 : y - 5);
	add_text(sb, label, 80);
	strbuf_addf(sb, " %s us</text></g>\n", t);
}

static void point_title(struct strbuf *sb, size_t i,
			const struct experiment *e)
{
	char t[32];
	double ratio = experiment_head_ratio(e);

	report_fmt_us(t, sizeof(t), report_time(e));
	strbuf_addf(sb, "<title>#%zu %.7s %s", i, git_oid_tostr_s(&e->id),
		    e->attempt ? "rejected" : e->status);
	if (e->attempt) {
		strbuf_addch(sb, ' ');
		add_text(sb, experiment_reason(e), 32);
	}
	strbuf_addf(sb, ", %s us in its run", t);
	if (ratio > 0)
		strbuf_addf(sb, ", %.2fx the best it was judged against",
			    ratio);
	strbuf_addstr(sb, ": ");
	add_text(sb, e->subject, 160);
	strbuf_addstr(sb, "</title>");
}

static void points(struct strbuf *sb, const struct report *r,
		   const struct scale *s, int have_y)
{
	for (size_t i = 0; i < r->h.nr; i++) {
		const struct experiment *e = &r->h.e[i];
		double us = report_plot_us(r, e), x = xmap(s, i);
		const char *end;

		if (us > 0 && have_y) {
			int kept = experiment_is_kept(e);

			strbuf_addf(sb, "<circle class=\"%s\" cx=\"%.1f\" "
				    "cy=\"%.1f\" r=\"4.5\" %s>",
				    kept ? "kept" : "rejected", x, ymap(s, us),
				    kept ? "fill=\"" C_KEPT "\"" :
				    "fill=\"white\" stroke=\"" C_REJ "\" "
				    "stroke-width=\"1.5\"");
			end = "</circle>\n";
		} else if (e->attempt) {
			strbuf_addf(sb, "<path class=\"failed\" d=\"M%.1f %d "
				    "l8 8 m0 -8 l-8 8\" stroke=\"" C_REJ "\" "
				    "stroke-width=\"1.5\">", x - 4, BAND - 4);
			end = "</path>\n";
		} else {
			strbuf_addf(sb, "<rect class=\"unverified\" "
				    "x=\"%.1f\" y=\"%d\" width=\"7\" "
				    "height=\"7\" fill=\"none\" "
				    "stroke=\"#888\">", x - 3.5, BAND - 3);
			end = "</rect>\n";
		}
		point_title(sb, i, e);
		strbuf_addstr(sb, end);
	}
}

/* The best time so far, as a step line from the first measured kept
 * commit to the last experiment. */
static void frontier(struct strbuf *sb, const struct report *r,
		     const struct scale *s)
{
	double best = 0;

	strbuf_addstr(sb, "<path id=\"frontier\" fill=\"none\" stroke=\""
		      C_BEST "\" stroke-width=\"2\" d=\"");
	for (size_t i = 0; i < r->h.nr; i++) {
		const struct experiment *e = &r->h.e[i];
		double us = report_time(e);

		if (!experiment_is_kept(e) || us <= 0 || (best && us >= best))
			continue;
		if (!best)
			strbuf_addf(sb, "M%.1f %.1f", xmap(s, i), ymap(s, us));
		else
			strbuf_addf(sb, " H%.1f V%.1f", xmap(s, i),
				    ymap(s, us));
		best = us;
	}
	if (best)
		strbuf_addf(sb, " H%.1f", xmap(s, r->h.nr - 1));
	else
		strbuf_addf(sb, "M%d %d", L, DB);
	strbuf_addstr(sb, "\"/>\n");
}

static const char *const shape_colors[] = {
	"#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
};

/* A line per shape of a workload of several, through the kept commits'
 * medians at it, its label (the shape) at its last point. */
static void shape_lines(struct strbuf *sb, const struct report *r,
			const struct scale *s)
{
	const struct result *v = plot_shapes(r);

	if (!v)
		return;
	strbuf_addstr(sb, "<g id=\"shapes\" font-size=\"10\">\n");
	for (size_t k = 0; k < v->nr_shapes; k++) {
		const char *sh = v->shapes[k].shape, *dt = v->shapes[k].dtype;
		const char *c = shape_colors[k % ARRAY_SIZE(shape_colors)];
		double lx = 0, ly = 0;
		int n = 0;

		if (!sh)
			continue;
		strbuf_addf(sb, "<path id=\"shape-%zu\" fill=\"none\" "
			    "stroke=\"%s\" stroke-width=\"1\" d=\"", k, c);
		for (size_t i = 0; i < r->h.nr; i++) {
			double us = experiment_is_kept(&r->h.e[i]) ?
				shape_us(&r->h.e[i], sh, dt) : 0;

			if (us <= 0)
				continue;
			lx = xmap(s, i);
			ly = ymap(s, us);
			strbuf_addf(sb, "%s%.1f %.1f", n++ ? " L" : "M", lx, ly);
		}
		strbuf_addstr(sb, "\"><title>");
		add_text(sb, sh, 64);
		strbuf_addstr(sb, ": the kept commits' median at this shape"
			      "</title></path>\n");
		if (n) {
			strbuf_addf(sb, "<text x=\"%.1f\" y=\"%.1f\" "
				    "fill=\"%s\" text-anchor=\"end\">", lx - 6,
				    ly - 4, c);
			add_text(sb, sh, 64);
			strbuf_addstr(sb, "</text>\n");
		}
	}
	strbuf_addstr(sb, "</g>\n");
}

static void legend(struct strbuf *sb, int unverified)
{
	int y = H - 16, x = L;

	strbuf_addf(sb, "<g id=\"legend\">"
		"<circle cx=\"%d\" cy=\"%d\" r=\"4.5\" fill=\"" C_KEPT "\"/>"
		"<text x=\"%d\" y=\"%d\">kept</text>", x, y - 4, x + 9, y);
	x += 60;
	strbuf_addf(sb, "<circle cx=\"%d\" cy=\"%d\" r=\"4\" fill=\"white\" "
		"stroke=\"" C_REJ "\" stroke-width=\"1.5\"/>"
		"<text x=\"%d\" y=\"%d\">rejected</text>", x, y - 4, x + 9, y);
	x += 90;
	strbuf_addf(sb, "<path d=\"M%d %d l8 8 m0 -8 l-8 8\" stroke=\""
		C_REJ "\" stroke-width=\"1.5\"/><text x=\"%d\" y=\"%d\">"
		"failed to build or verify</text>", x - 4, y - 8, x + 9, y);
	x += 190;
	strbuf_addf(sb, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" "
		"stroke=\"" C_BEST "\" stroke-width=\"2\"/>"
		"<text x=\"%d\" y=\"%d\">best so far</text>",
		x - 6, y - 4, x + 12, y - 4, x + 17, y);
	x += 110;
	if (unverified)
		strbuf_addf(sb, "<rect x=\"%d\" y=\"%d\" width=\"7\" "
			"height=\"7\" fill=\"none\" stroke=\"#888\"/>"
			"<text x=\"%d\" y=\"%d\">unverified</text>",
			x - 3, y - 8, x + 9, y);
	strbuf_addstr(sb, "</g>\n");
}

/* ", tip 17.8 us (3.31x)"; "unverified" for a tip without a time. */
static void subtitle_commit(struct strbuf *sb, const struct report *r,
			    const struct experiment *e, const char *what)
{
	char t[32];

	if (!e)
		return;
	report_fmt_us(t, sizeof(t), report_time(e));
	if (report_time(e) <= 0) {
		strbuf_addf(sb, ", %s unverified", what);
		return;
	}
	strbuf_addf(sb, ", %s %s us", what, t);
	if (report_speedup(r, e) > 0)
		strbuf_addf(sb, " (%.2fx)", report_speedup(r, e));
}

static void titles(struct strbuf *sb, const struct report *r)
{
	const struct result *res = &(r->best ? r->best : r->base)->result;
	const char *op = res->op, *dev = res->device_name;
	char a[32], f[32];

	strbuf_addf(sb, "<text x=\"%d\" y=\"26\" font-size=\"16\" "
		    "font-weight=\"bold\">", L);
	add_text(sb, r->branch, 200);
	strbuf_addstr(sb, ": ");
	add_text(sb, op ? op : r->h.name, 64);
	strbuf_addch(sb, ' ');
	add_text(sb, r->shape, 64);
	strbuf_addch(sb, ' ');
	add_text(sb, r->dtype, 16);
	if (dev) {
		strbuf_addstr(sb, " on ");
		add_text(sb, dev, 80);
	}
	report_fmt_us(a, sizeof(a), r->base_us);
	report_fmt_us(f, sizeof(f), r->floor_us);
	strbuf_addf(sb, "</text>\n<text x=\"%d\" y=\"46\" fill=\"#333\">"
		    "baseline %s us", L, a);
	subtitle_commit(sb, r, r->tip, "tip");
	if (r->best != r->tip)
		subtitle_commit(sb, r, r->best, "best");
	strbuf_addf(sb, ", floor %s us; %zu experiment%s: %d kept, %d "
		    "rejected</text>\n", f, r->h.nr - 1, r->h.nr == 2 ? "" : "s",
		    r->kept, r->rejected);
}

void report_svg(struct strbuf *sb, const struct report *r)
{
	struct scale s = { 0 };
	int have_y = make_scale(&s, r);

	strbuf_addf(sb, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		    "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" "
		    "width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
		    "font-family=\"sans-serif\" font-size=\"12\">\n", W, H, W,
		    H);
	strbuf_addstr(sb, "<title>");
	add_text(sb, r->branch, 200);
	strbuf_addstr(sb, ": time per experiment</title>\n<rect width=\"100%\" "
		      "height=\"100%\" fill=\"white\"/>\n");
	titles(sb, r);
	strbuf_addstr(sb, "<g id=\"grid\" fill=\"#333\">\n");
	if (have_y)
		y_ticks(sb, &s);
	x_ticks(sb, &s, r->h.nr);
	strbuf_addf(sb, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\" "
		    "fill=\"#888\">no time</text>\n", L - 6, BAND + 4);
	strbuf_addstr(sb, "</g>\n");
	strbuf_addf(sb, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" "
		    "fill=\"none\" stroke=\"#333\"/>\n", L, T, R - L, B - T);
	strbuf_addf(sb, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" "
		    "stroke=\"#ccc\" stroke-dasharray=\"2 3\"/>\n", L,
		    BAND + 8, R, BAND + 8);
	strbuf_addf(sb, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">"
		    "experiment</text>\n", (L + R) / 2, B + 38);
	strbuf_addf(sb, "<text transform=\"translate(22 %d) rotate(-90)\" "
		    "text-anchor=\"middle\">median time (us%s)</text>\n",
		    (DT + DB) / 2, s.log ? ", log scale" : "");
	if (have_y && r->base_us > 0)
		hline(sb, &s, "baseline", r->base_us, "baseline", "6 4",
		      r->floor_us > r->base_us);
	if (have_y && r->floor_us > 0) {
		const char *kind = r->bench.floor_kind;
		struct strbuf label = STRBUF_INIT;

		strbuf_addf(&label, "floor (%s)", kind ? kind :
			    "speed of light");
		hline(sb, &s, "floor", r->floor_us, label.buf, "2 3",
		      r->floor_us <= r->base_us);
		strbuf_release(&label);
	}
	if (!have_y)
		strbuf_addf(sb, "<text x=\"%d\" y=\"%d\" "
			    "text-anchor=\"middle\" fill=\"#888\">no measured "
			    "experiments</text>\n", (L + R) / 2, (DT + DB) / 2);
	if (have_y)
		shape_lines(sb, r, &s);
	frontier(sb, r, &s);
	strbuf_addstr(sb, "<g id=\"points\">\n");
	points(sb, r, &s, have_y);
	strbuf_addstr(sb, "</g>\n");
	legend(sb, r->unverified);
	strbuf_addstr(sb, "</svg>\n");
}
