/*
 * cmd-report.c: `report`: the branch as a pull-request body.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bin/builtin.h"
#include "report/report.h"
#include "lib/repo.h"

static const char usage_report[] =
	"usage: git autokernel report [--format md|json|svg] [-o <file>]\n"
	"\n"
	"A pull-request body for the current autokernel/* branch, led by the\n"
	"tip's figure (what a merge takes): op, bench shape, dtypes, the\n"
	"tolerances judged with, device and tool; baseline, tip, best and\n"
	"floor; references\n"
	"and per-shape timings when the notes have them; the kept experiments\n"
	"with their hypotheses; rejected attempts by reason; how to\n"
	"reproduce.\n"
	"--format svg is the progress plot alone, json the same data.  With\n"
	"-o report.md the plot is written beside it as report.svg and\n"
	"embedded.  --json is --format json.\n";

enum format { FMT_MD, FMT_JSON, FMT_SVG };

/* report.md -> report.svg; other names get .svg appended. */
static void svg_path_for(struct strbuf *svg, const char *md)
{
	strbuf_addstr(svg, md);
	if (ends_with(svg->buf, ".md"))
		strbuf_setlen(svg, svg->len - 3);
	strbuf_addstr(svg, ".svg");
}

static int write_out(const char *path, const struct strbuf *sb)
{
	if (!path) {
		fwrite(sb->buf, 1, sb->len, stdout);
		return 0;
	}
	return write_file_atomic(path, sb->buf, sb->len);
}

static int render(const struct report *r, enum format fmt, const char *out)
{
	struct strbuf text = STRBUF_INIT, svg = STRBUF_INIT;
	struct strbuf svg_path = STRBUF_INIT;
	const char *rel = NULL;
	json_t *j;
	int ret = 0;

	if (fmt == FMT_JSON) {
		char *s;

		j = report_json(r);
		s = json_dumps(j, JSON_INDENT(2));
		strbuf_addstr(&text, s);
		strbuf_addch(&text, '\n');
		free(s);
		json_decref(j);
	} else if (fmt == FMT_SVG) {
		report_svg(&text, r);
	} else {
		if (out) {
			svg_path_for(&svg_path, out);
			rel = strrchr(svg_path.buf, '/');
			rel = rel ? rel + 1 : svg_path.buf;
			report_svg(&svg, r);
			ret = write_file_atomic(svg_path.buf, svg.buf, svg.len);
			if (ret < 0)
				goto cleanup;
		}
		report_md(&text, r, rel);
	}
	ret = write_out(out, &text);
	if (!ret && out)
		fprintf(stderr, "wrote %s%s%s\n", out, rel ? " and " : "",
			rel ? svg_path.buf : "");
cleanup:
	strbuf_release(&text);
	strbuf_release(&svg);
	strbuf_release(&svg_path);
	return ret;
}

static int parse_format(const char *s, enum format *fmt)
{
	if (!strcmp(s, "md") || !strcmp(s, "markdown"))
		*fmt = FMT_MD;
	else if (!strcmp(s, "json"))
		*fmt = FMT_JSON;
	else if (!strcmp(s, "svg"))
		*fmt = FMT_SVG;
	else
		return error("unknown format '%s' (md, json or svg)", s);
	return 0;
}

int cmd_report(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "format", required_argument, NULL, 'f' },
		{ "output", required_argument, NULL, 'o' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct report r = REPORT_INIT;
	enum format fmt = FMT_MD;
	const char *out = NULL;
	char *name = NULL;
	int opt, rc = 0;

	while ((opt = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
		if (opt == 'f') {
			if (parse_format(optarg, &fmt) < 0)
				return 2;
		} else if (opt == 'o') {
			out = optarg;
		} else if (opt == 'j') {
			fmt = FMT_JSON;
		} else {
			return usage_with(usage_report, opt == 'h');
		}
	}
	if (optind < argc)
		return usage_with(usage_report, 0);
	name = repo_branch_name();      /* NEED_BRANCH: never NULL */
	if (report_load(&r, name) < 0) {
		rc = 3;
	} else {
		history_advise(&r.h);
		report_warn(&r);
		if (render(&r, fmt, out) < 0)
			rc = 3;
	}
	report_release(&r);
	free(name);
	return rc;
}
