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
	"                            [--dtype D] [--all-shapes] [--threshold P]\n"
	"                            [--json]\n"
	"\n"
	"Times the kernel at its bench shape beside a copy of the op's minimum\n"
	"traffic (its floor).  With --against, times both interleaved and\n"
	"exits 0 when not slower than <rev> by more than the threshold (5%),\n"
	"1 when slower, 125 when it cannot be built or measured (git bisect\n"
	"run's terms).\n";

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
		if (rc == 1)
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
	if (rc == 1) {
		fprintf(stderr, "error: %s\n", verdict.buf);
		goto cleanup;
	}
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
	return rc;
}

static void print_bench(json_t *b, const char *const *labels, int n)
{
	json_t *ks = json_object_get(b, "kernels");
	json_t *copy = json_object_get(b, "copy");

	printf("%s %s: floor %.2f us (%s; %.1f MB moved)\n",
	       json_string_value(json_object_get(b, "shape")),
	       json_string_value(json_object_get(b, "dtype")),
	       json_number_value(json_object_get(b, "floor_us")),
	       json_string_value(json_object_get(b, "floor_kind")),
	       json_number_value(json_object_get(b, "bytes")) / 1e6);
	printf("  %-24s %12s %10s %9s %5s\n", "kernel", "median", "IQR",
	       "roofline", "n");
	for (int i = 0; i < n; i++) {
		json_t *k = json_array_get(ks, i);

		printf("  %-24s %9.2f us %7.2f us %8.1f%% %5lld\n", labels[i],
		       json_number_value(json_object_get(k, "median_us")),
		       json_number_value(json_object_get(k, "q3_us")) -
		       json_number_value(json_object_get(k, "q1_us")),
		       100 * json_number_value(json_object_get(k, "roofline")),
		       (long long)json_integer_value(json_object_get(k, "n")));
	}
	printf("  %-24s %9.2f us %7.2f us\n", "copy (same bytes)",
	       json_number_value(json_object_get(copy, "median_us")),
	       json_number_value(json_object_get(copy, "q3_us")) -
	       json_number_value(json_object_get(copy, "q1_us")));
}

struct bench_opts {
	const char *spec, *against, *dtype;
	double threshold;
	int json, all_shapes;
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
		case 't':
			if (parse_fraction(optarg, &o->threshold) < 0)
				return error("bad threshold '%s' (e.g. 5%%)",
					     optarg) ? 2 : 2;
			break;
		default:
			return usage_with(usage_bench, opt == 'h') ? 2 : -1;
		}
	}
	if (optind < argc)
		o->spec = argv[optind++];
	if (optind < argc)
		return usage_with(usage_bench, 0);
	return 0;
}

/* With --against, every failure to measure is "cannot test" (125). */
static int env_rc(const struct bench_opts *o, int rc)
{
	return o->against && rc ? 125 : rc;
}

static int bench_one_shape(struct judge *j, struct candidate *c,
			   const struct bench_opts *o, enum ak_dtype dt,
			   int n, const char *const *labels, json_t *all)
{
	static const int slots[] = { 0, 1 };
	struct strbuf verdict = STRBUF_INIT;
	json_t *res = NULL;
	int rc;

	rc = judge_run_bench(j, &c->p, NULL, dt, slots, n,
			     judge_ceilings(j, 0), &res, &verdict);
	if (rc) {
		fprintf(stderr, "error: %s\n", verdict.buf);
		json_decref(res);
		strbuf_release(&verdict);
		return 1;
	}
	if (!o->json)
		print_bench(res, labels, n);
	json_array_append_new(all, res);
	strbuf_release(&verdict);
	return 0;
}

static int bench_verdict(json_t *res, const struct bench_opts *o)
{
	json_t *ks = json_object_get(res, "kernels");
	double a = json_number_value(json_object_get(json_array_get(ks, 0),
						     "median_us"));
	double b = json_number_value(json_object_get(json_array_get(ks, 1),
						     "median_us"));
	double slow = a / b - 1;

	json_object_set_new(res, "ratio", json_real(a / b));
	json_object_set_new(res, "slow", json_boolean(slow > o->threshold));
	if (!o->json)
		printf("ratio %.3fx: %s (threshold %.1f%%)\n", a / b,
		       slow > o->threshold ? "slow" : "fast",
		       o->threshold * 100);
	return slow > o->threshold ? 1 : 0;
}

int cmd_bench(int argc, char **argv)
{
	struct bench_opts o = { 0 };
	struct candidate c = CANDIDATE_INIT, base = CANDIDATE_INIT;
	struct judge j = JUDGE_INIT;
	struct strbuf verdict = STRBUF_INIT;
	const char *labels[2];
	json_t *all = json_array();
	enum ak_dtype dt;
	int rc, n = 1;

	if ((rc = bench_parse(argc, argv, &o)))
		return rc < 0 ? 0 : rc;
	if ((rc = candidate_load(&c, o.spec, NULL)) ||
	    (o.against && (rc = candidate_load(&base, o.against, c.name))) ||
	    (rc = judge_start(&j, c.p.backend))) {
		rc = env_rc(&o, rc);
		goto cleanup;
	}
	dt = c.p.dtypes[0];
	if (o.dtype && dtype_parse(o.dtype, &dt) < 0) {
		rc = error("unknown dtype '%s'", o.dtype) ? 2 : 2;
		goto cleanup;
	}
	labels[0] = c.label;
	labels[1] = base.label;
	if ((rc = judge_build(&j, &c, 0, &verdict)) ||
	    (o.against && (rc = judge_build(&j, &base, 1, &verdict)))) {
		if (verdict.len)
			fprintf(stderr, "error: %s\n", verdict.buf);
		rc = env_rc(&o, rc);
		goto cleanup;
	}
	n = o.against ? 2 : 1;
	if (!o.json)
		printf("bench %s on %s: %s\n", c.p.op->name, c.p.backend,
		       judge_device_name(&j));
	rc = bench_one_shape(&j, &c, &o, dt, n, labels, all);
	for (int s = 0; !rc && o.all_shapes && s < c.p.n_test; s++) {
		struct candidate shape = c;

		shape.p.bench = c.p.test[s];
		rc = bench_one_shape(&j, &shape, &o, dt, n, labels, all);
	}
	if (rc) {
		rc = env_rc(&o, rc);
		goto cleanup;
	}
	if (o.against)
		rc = bench_verdict(json_array_get(all, 0), &o);
	if (o.json)
		print_json(o.all_shapes ? all : json_array_get(all, 0));
cleanup:
	json_decref(all);
	judge_stop(&j);
	candidate_release(&c);
	candidate_release(&base);
	strbuf_release(&verdict);
	return rc;
}
