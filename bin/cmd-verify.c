/*
 * cmd-verify.c: `verify` and `bench`, the judge on demand.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bin/builtin.h"
#include "ops/dtype.h"
#include "judge/judge.h"
#include "judge/torchref.h"
#include "lib/records.h"
#include "lib/repo.h"

static const char usage_verify[] =
	"usage: git autokernel verify [--json] [--build-only] [<rev> | --index | <dir>]\n"
	"\n"
	"Runs the five stages (smoke, shape sweep, stability, determinism,\n"
	"edge cases) on the work tree's kernel, the index's, a revision's, or\n"
	"a kernel directory's.  Exit 0 pass, 1 fail, 3 no device/toolchain.\n"
	"--build-only compiles it (no device needed) and stops there.\n";

static const char usage_bench[] =
	"usage: git autokernel bench [<rev> | --index | <dir>] [--against <rev>]\n"
	"                            [--dtype D] [--shape S] [--all-shapes]\n"
	"                            [--threshold P] [--torch [--record]]\n"
	"                            [--json]\n"
	"\n"
	"Times the kernel at its bench shape beside a copy of the op's minimum\n"
	"traffic (its floor).  With --against, times both interleaved and\n"
	"exits 0 when not slower than <rev> by more than the threshold (5%),\n"
	"1 when slower, 125 when it cannot be built or measured (git bisect\n"
	"run's terms).  With --torch, PyTorch's own op (eager, and\n"
	"torch.compile where it works) is timed at each shape too; --record\n"
	"writes its figures into the note of <rev> (default HEAD).\n";

static void print_json(json_t *j)
{
	json_dumpf(j, stdout, JSON_INDENT(2));
	putchar('\n');
}

int cmd_verify(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "index", no_argument, NULL, 'i' },
		{ "build-only", no_argument, NULL, 'b' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct candidate c = CANDIDATE_INIT;
	struct judge j = JUDGE_INIT;
	struct strbuf verdict = STRBUF_INIT;
	struct cases *cases = NULL;
	const char *spec = NULL;
	json_t *res = NULL;
	int json = 0, build_only = 0, opt, rc;

	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (opt == 'j')
			json = 1;
		else if (opt == 'b')
			build_only = 1;
		else if (opt == 'i')
			spec = "--index";
		else
			return usage_with(usage_verify, opt == 'h');
	}
	if (optind < argc)
		spec = argv[optind++];
	if (optind < argc)
		return usage_with(usage_verify, 0);
	if ((rc = candidate_load(&c, spec, NULL)))
		goto cleanup;
	if (build_only) {
		rc = judge_build(&j, &c, -1, &verdict);
		if (rc == -1)
			fprintf(stderr, "error: %s\n", verdict.buf);
		else if (!rc)
			printf("built %s/%s (%s) for %s: %s%s\n", c.name,
			       c.p.kernel, c.label, c.p.backend, c.so,
			       c.cached ? " (cached)" : "");
		goto cleanup;
	}
	if ((rc = judge_start(&j, c.p.backend)))
		goto cleanup;
	cases = cases_start(&c.p, -1);
	cases_map(cases, &j.r);
	if (!json)
		printf("verify %s/%s (%s) on %s: %s\n", c.name, c.p.kernel,
		       c.label, c.p.backend, judge_device_name(&j));
	rc = judge_build(&j, &c, 0, &verdict);
	if (rc == -1)
		fprintf(stderr, "error: %s\n", verdict.buf);
	if (rc)
		goto cleanup;
	rc = judge_run_stages(&j, &c.p, cases, 0, &res, &verdict,
			      json ? NULL : stdout);
	if (json) {
		print_json(res);
	} else if (rc) {
		printf("FAIL %lld/5: %s\n",
		       (long long)json_integer_value(json_object_get(res,
							"stages_passed")),
		       verdict.buf);
	} else {
		printf("pass 5/5 in %.2f s\n",
		       json_number_value(json_object_get(res, "seconds")));
	}
cleanup:
	cases_free(cases);
	json_decref(res);
	judge_stop(&j);
	candidate_release(&c);
	strbuf_release(&verdict);
	return exit_code(rc);
}

static double median_of(json_t *stats)
{
	return json_number_value(json_object_get(stats, "median_us"));
}

static void print_row(const char *label, json_t *k)
{
	printf("  %-24s %9.2f us %7.2f us %8.1f%% %5lld", label, median_of(k),
	       json_number_value(json_object_get(k, "q3_us")) -
	       json_number_value(json_object_get(k, "q1_us")),
	       100 * json_number_value(json_object_get(k, "roofline")),
	       (long long)json_integer_value(json_object_get(k, "n")));
}

/* PyTorch's time over the kernel's, in the columns torch has. */
static void print_vs(json_t *torch, json_t *k)
{
	json_t *e = json_object_get(torch, "eager");
	json_t *c = json_object_get(torch, "compile");

	if (e)
		printf(" %9.2fx", median_of(e) / median_of(k));
	if (c)
		printf(" %9.2fx", median_of(c) / median_of(k));
}

static void print_bench(json_t *b, const char *const *labels, int n)
{
	json_t *ks = json_object_get(b, "kernels");
	json_t *copy = json_object_get(b, "copy");
	json_t *torch = json_object_get(b, "torch");
	json_t *e = json_object_get(torch, "eager");
	json_t *c = json_object_get(torch, "compile");

	printf("%s %s: floor %.2f us (%s; %.1f MB moved)\n",
	       json_string_value(json_object_get(b, "shape")),
	       json_string_value(json_object_get(b, "dtype")),
	       json_number_value(json_object_get(b, "floor_us")),
	       json_string_value(json_object_get(b, "floor_kind")),
	       json_number_value(json_object_get(b, "bytes")) / 1e6);
	printf("  %-24s %12s %10s %9s %5s%s%s\n", "kernel", "median", "IQR",
	       "roofline", "n", e ? " vs PyTorch" : "",
	       c ? " vs compile" : "");
	for (int i = 0; i < n; i++) {
		print_row(labels[i], json_array_get(ks, i));
		print_vs(torch, json_array_get(ks, i));
		putchar('\n');
	}
	if (e) {
		print_row("PyTorch", e);
		putchar('\n');
	}
	if (c) {
		print_row("PyTorch compile", c);
		putchar('\n');
	}
	printf("  %-24s %9.2f us %7.2f us\n", "copy (same bytes)",
	       median_of(copy),
	       json_number_value(json_object_get(copy, "q3_us")) -
	       json_number_value(json_object_get(copy, "q1_us")));
}

struct bench_opts {
	const char *spec, *against, *dtype, *shape;
	double threshold;
	int json, all_shapes, torch, record;
};

static int bench_parse(int argc, char **argv, struct bench_opts *o)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "index", no_argument, NULL, 'i' },
		{ "against", required_argument, NULL, 'a' },
		{ "dtype", required_argument, NULL, 'd' },
		{ "threshold", required_argument, NULL, 't' },
		{ "all-shapes", no_argument, NULL, 's' },
		{ "shape", required_argument, NULL, 'S' },
		{ "torch", no_argument, NULL, 'T' },
		{ "record", no_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int opt;

	o->threshold = 0.05;
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 'j': o->json = 1; break;
		case 'i': o->spec = "--index"; break;
		case 'a': o->against = optarg; break;
		case 'd': o->dtype = optarg; break;
		case 's': o->all_shapes = 1; break;
		case 'S': o->shape = optarg; break;
		case 'T': o->torch = 1; break;
		case 'r': o->record = 1; break;
		case 't':
			if (parse_fraction(optarg, &o->threshold) < 0) {
				error("bad threshold '%s' (e.g. 5%%)", optarg);
				return EXIT_USAGE;
			}
			break;
		default:
			return usage_with(usage_bench, opt == 'h') ? 2 : -1;
		}
	}
	if (optind < argc)
		o->spec = argv[optind++];
	if (optind < argc)
		return usage_with(usage_bench, 0);
	if (o->record && !o->torch) {
		error("--record writes PyTorch's figures: it needs --torch");
		return EXIT_USAGE;
	}
	/* the figures go into a commit's note: by default the tip's */
	if (o->record && !o->spec)
		o->spec = "HEAD";
	return 0;
}

/* The exit code of a library return; with --against, every failure to
 * measure is "cannot test" (125). */
static int env_rc(const struct bench_opts *o, int rc)
{
	return o->against && rc ? EXIT_CANNOT_TEST : exit_code(rc);
}

/* The shapes bench times: the workload (or the one --shape names), and
 * with --all-shapes the test shapes after it, weight 0. */
static int bench_plan(struct work *w, int *n, const struct problem *p,
		      const struct bench_opts *o, int dt_given, enum ak_dtype dt)
{
	char err[256];

	*n = 0;
	if (o->shape) {
		if (shape_parse(&w[0].s, p->op, o->shape, err, sizeof(err)) < 0)
			return error("%s", err);
		w[0].weight = 1;
		w[0].dt = dt;
		*n = 1;
	}
	for (int i = 0; !o->shape && i < p->n_work; i++) {
		w[(*n)++] = p->work[i];
		if (dt_given)
			w[*n - 1].dt = dt;
	}
	for (int i = 0; o->all_shapes && i < p->n_test &&
	     *n < 2 * AK_OP_MAX_SHAPES; i++)
		w[(*n)++] = (struct work){ p->test[i], 0, dt };
	return 0;
}

/* Why PyTorch has no figure of what at res's shape, on stderr, unless
 * it said the same at the shape before (said). */
static void say_absent(json_t *res, const char *what, const char *why,
		       struct strbuf *said)
{
	if (!why || !strcmp(said->buf, why))
		return;
	fprintf(stderr, "bench: no %s figure at %s %s: %s\n", what,
		json_string_value(json_object_get(res, "shape")),
		json_string_value(json_object_get(res, "dtype")), why);
	strbuf_reset(said);
	strbuf_addstr(said, why);
}

/* PyTorch beside the kernel at w, into res; said[0] and said[1]: what
 * was last said of eager and of torch.compile. */
static void bench_torch(struct torchref *t, struct judge *j,
			const struct problem *p, const struct work *w,
			json_t *res, struct strbuf *said)
{
	json_t *fig = torchref_bench(t, j, p, &w->s, w->dt);

	torchref_relate(fig, median_of(json_array_get(json_object_get(res,
							"kernels"), 0)),
			json_number_value(json_object_get(res, "floor_us")));
	json_object_set_new(res, "torch", fig);
	say_absent(res, "PyTorch", json_string_value(json_object_get(fig,
							"absent")), &said[0]);
	/* where torch.compile works but not at this shape */
	if (t->compile)
		say_absent(res, "torch.compile", json_string_value(
			json_object_get(fig, "no_compile")), &said[1]);
}

static int bench_one_shape(struct judge *j, struct candidate *c,
			   const struct bench_opts *o, const struct work *w,
			   int n, const char *const *labels, json_t *all,
			   struct torchref *t, struct strbuf said[2])
{
	static const int slots[] = { 0, 1 };
	struct strbuf verdict = STRBUF_INIT;
	json_t *res = NULL;
	int rc;

	rc = judge_run_bench_shape(j, &c->p, &w->s, w->dt, slots, n, &res,
				   &verdict);
	if (rc) {
		fprintf(stderr, "error: %s\n", verdict.buf);
		json_decref(res);
		strbuf_release(&verdict);
		return 1;
	}
	json_object_set_new(res, "weight", json_real(w->weight));
	if (t && t->ok)
		bench_torch(t, j, &c->p, w, res, said);
	else if (t)
		json_object_set_new(res, "torch", json_pack("{s:s}", "absent",
							    t->why.buf));
	if (!o->json)
		print_bench(res, labels, n);
	json_array_append_new(all, res);
	strbuf_release(&verdict);
	return 0;
}

/* The weighted total of kernel k over the shapes of all. */
static double weighted(json_t *all, int k)
{
	double t = 0;
	json_t *b;
	size_t i;

	json_array_foreach(all, i, b)
		t += json_number_value(json_object_get(b, "weight")) *
			json_number_value(json_object_get(json_array_get(
				json_object_get(b, "kernels"), k), "median_us"));
	return t;
}

static int bench_verdict(json_t *out, json_t *all, const struct bench_opts *o)
{
	double a = weighted(all, 0), b = weighted(all, 1);
	double slow = a / b - 1;

	json_object_set_new(out, "ratio", json_real(a / b));
	json_object_set_new(out, "slow", json_boolean(slow > o->threshold));
	if (!o->json)
		printf("ratio %.3fx%s: %s (threshold %.1f%%)\n", a / b,
		       json_array_size(all) > 1 ? " of the weighted totals" : "",
		       slow > o->threshold ? "slow" : "fast",
		       o->threshold * 100);
	return slow > o->threshold ? 1 : 0;
}

/* The weighted total of PyTorch's key ("eager", "compile") over the
 * shapes of all; 0 when a shape that weighs has none. */
static double torch_weighted(json_t *all, const char *key)
{
	double t = 0;
	json_t *b;
	size_t i;

	json_array_foreach(all, i, b) {
		double w = json_number_value(json_object_get(b, "weight"));
		double us = median_of(json_object_get(json_object_get(b,
							"torch"), key));

		if (w > 0 && us <= 0)
			return 0;
		t += w * us;
	}
	return t;
}

/* The weighted totals of PyTorch beside the kernel's, into out and
 * after the kernel's total on the terminal. */
static void torch_totals(json_t *out, json_t *all, int json)
{
	double k = weighted(all, 0), e = torch_weighted(all, "eager");
	double c = torch_weighted(all, "compile");

	if (e > 0)
		json_object_set_new(out, "torch_total_us", json_real(e));
	if (c > 0)
		json_object_set_new(out, "compile_total_us", json_real(c));
	if (!json && e > 0)
		printf("; PyTorch %.2f us (%.2fx)", e, e / k);
	if (!json && c > 0)
		printf(", torch.compile %.2f us (%.2fx)", c, c / k);
}

/* One shape: its bench object, as before workloads; several: the
 * shapes and their weighted totals. */
static json_t *bench_output(json_t *all, int n, int json)
{
	json_t *out;

	if (json_array_size(all) == 1)
		return json_incref(json_array_get(all, 0));
	out = json_pack("{s:O,s:f}", "shapes", all, "total_us",
			weighted(all, 0));
	if (n > 1)
		json_object_set_new(out, "against_total_us",
				    json_real(weighted(all, 1)));
	if (!json)
		printf("weighted total: %.2f us", weighted(all, 0));
	torch_totals(out, all, json);
	if (!json)
		putchar('\n');
	return out;
}

/* PyTorch's runner, spawned beside the kernel's: ready, or why not on
 * stderr, once. */
static void torch_start(struct torchref *t, const struct problem *p, int json)
{
	if (torchref_ready(t, p) < 0) {
		fprintf(stderr, "bench: no PyTorch column: %s\n", t->why.buf);
		return;
	}
	if (!t->compile)
		fprintf(stderr, "bench: no torch.compile column: %s\n",
			t->why_compile.buf);
	if (!json)
		printf("beside PyTorch %s on %s%s\n", t->version,
		       torchref_device(t), t->compile ?
		       ": eager and torch.compile" : "");
}

/* The note's "torch": PyTorch's figures at each shape that has them. */
static json_t *torch_record(json_t *all, const struct torchref *t,
			    struct judge *j)
{
	static const char *const keys[] = {
		"eager", "compile", "vs_eager", "vs_compile", "no_compile",
		"checked",
	};
	json_t *shapes = json_array(), *b, *rec;
	const char *no;
	size_t i;

	json_array_foreach(all, i, b) {
		json_t *fig = json_object_get(b, "torch"), *row;

		if (!json_object_get(fig, "eager"))
			continue;
		row = json_pack("{s:O,s:O,s:O,s:f}", "shape",
				json_object_get(b, "shape"), "dtype",
				json_object_get(b, "dtype"), "weight",
				json_object_get(b, "weight"), "kernel_us",
				median_of(json_array_get(json_object_get(b,
							"kernels"), 0)));
		for (size_t k = 0; k < ARRAY_SIZE(keys); k++)
			if (json_object_get(fig, keys[k]))
				json_object_set(row, keys[k],
						json_object_get(fig, keys[k]));
		/* said once for all, below, unless it is the shape's own */
		no = json_string_value(json_object_get(row, "no_compile"));
		if (no && !strcmp(no, t->why_compile.buf))
			json_object_del(row, "no_compile");
		json_array_append_new(shapes, row);
	}
	rec = json_pack("{s:s,s:s,s:s,s:s,s:s,s:o}", "by",
			"git autokernel bench --torch", "torch", t->version,
			"device", judge_device_name(j), "torch_device",
			torchref_device(t), "tool", AK_VERSION, "shapes",
			shapes);
	if (!t->compile)
		json_object_set_new(rec, "no_compile",
				    json_string(t->why_compile.buf));
	return rec;
}

/* --record: the figures into the note of the commit benchmarked. */
static int bench_record(const struct candidate *c, json_t *all,
			const struct torchref *t, struct judge *j)
{
	json_t *rec;
	git_oid id;
	size_t n;
	int ret;

	if (!t->ok) {
		fprintf(stderr, "bench: nothing recorded\n");
		return 0;
	}
	rec = torch_record(all, t, j);
	n = json_array_size(json_object_get(rec, "shapes"));
	if (!n) {
		fprintf(stderr, "bench: nothing recorded: PyTorch has no "
			"figure at any shape\n");
		json_decref(rec);
		return 0;
	}
	ret = git_oid_fromstr(&id, c->commit) < 0 ?
		error("bad commit id '%s'", c->commit) :
		note_set(&id, "torch", rec);
	if (!ret)
		fprintf(stderr, "bench: recorded PyTorch's figures at %zu "
			"shape%s in the note of %s\n", n, n > 1 ? "s" : "",
			c->label);
	json_decref(rec);
	return ret ? EXIT_ENV : 0;
}

/* The candidate, the revision it is against, and with --record a
 * commit to record on; 0 or an exit code. */
static int bench_load(struct candidate *c, struct candidate *base,
		      const struct bench_opts *o)
{
	int rc;

	if ((rc = candidate_load(c, o->spec, NULL)) ||
	    (o->against && (rc = candidate_load(base, o->against, c->name))))
		return env_rc(o, rc);
	if (o->record && !c->commit[0]) {
		error("--record writes into a commit's note: bench a revision, "
		      "not the %s", c->label);
		return EXIT_USAGE;
	}
	return 0;
}

/* The kernel (and with --against the other) built and loaded; 0 or an
 * exit code. */
static int bench_build(struct judge *j, struct candidate *c,
		       struct candidate *base, const struct bench_opts *o)
{
	struct strbuf verdict = STRBUF_INIT;
	int rc;

	if ((rc = judge_build(j, c, 0, &verdict)) ||
	    (o->against && (rc = judge_build(j, base, 1, &verdict)))) {
		if (verdict.len)
			fprintf(stderr, "error: %s\n", verdict.buf);
		rc = env_rc(o, rc);
	}
	strbuf_release(&verdict);
	return rc;
}

int cmd_bench(int argc, char **argv)
{
	struct bench_opts o = { 0 };
	struct candidate c = CANDIDATE_INIT, base = CANDIDATE_INIT;
	struct judge j = JUDGE_INIT;
	struct torchref t = TORCHREF_INIT;
	struct strbuf said[2] = { STRBUF_INIT, STRBUF_INIT };
	const char *labels[2];
	json_t *all = json_array(), *out;
	struct work plan[2 * AK_OP_MAX_SHAPES];
	enum ak_dtype dt;
	int rc, rec, n = 1, np = 0;

	if ((rc = bench_parse(argc, argv, &o)))
		return rc < 0 ? 0 : rc;
	if ((rc = bench_load(&c, &base, &o)))
		goto cleanup;
	if ((rc = judge_start(&j, c.p.backend))) {
		rc = env_rc(&o, rc);
		goto cleanup;
	}
	dt = c.p.dtypes[0];
	if (o.dtype && dtype_parse(o.dtype, &dt) < 0) {
		error("unknown dtype '%s'", o.dtype);
		rc = EXIT_USAGE;
		goto cleanup;
	}
	/* torch imports while the kernel builds */
	if (o.torch)
		torchref_spawn(&t, c.p.backend);
	labels[0] = c.label;
	labels[1] = base.label;
	if ((rc = bench_build(&j, &c, &base, &o)))
		goto cleanup;
	n = o.against ? 2 : 1;
	if (!o.json)
		printf("bench %s on %s: %s\n", c.p.op->name, c.p.backend,
		       judge_device_name(&j));
	if (o.torch)
		torch_start(&t, &c.p, o.json);
	if (bench_plan(plan, &np, &c.p, &o, o.dtype != NULL, dt) < 0) {
		rc = o.against ? 125 : 2;
		goto cleanup;
	}
	for (int s = 0; !rc && s < np; s++)
		rc = bench_one_shape(&j, &c, &o, &plan[s], n, labels, all,
				     o.torch ? &t : NULL, said);
	if (rc) {
		rc = env_rc(&o, rc);
		goto cleanup;
	}
	out = bench_output(all, n, o.json);
	if (o.against)
		rc = bench_verdict(out, all, &o);
	if (o.json)
		print_json(out);
	json_decref(out);
	/* with --against, whatever the verdict */
	if (o.record && (rec = bench_record(&c, all, &t, &j)))
		rc = rec;
cleanup:
	json_decref(all);
	torchref_release(&t);
	judge_stop(&j);
	candidate_release(&c);
	candidate_release(&base);
	strbuf_release(&said[0]);
	strbuf_release(&said[1]);
	return rc;
}
