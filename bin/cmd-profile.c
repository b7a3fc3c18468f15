/*
 * cmd-profile.c: `profile`: which of a model's kernels matter, and by how
 * much the whole model could gain from each (Amdahl), from a PyTorch
 * profiler trace or from any CUDA program run under the tool's CUPTI
 * injection library; `--start N` starts branches for the top ops.
 */
#include <dirent.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "bin/builtin.h"
#include "lib/paths.h"
#include "ops/problem.h"
#include "profile/profile.h"
#include "lib/repo.h"
#include "lib/run.h"
#include "lib/tempdir.h"

static const char usage_profile[] =
	"usage: git autokernel profile [--json] [--start N] [--backend B] TRACE\n"
	"   or: git autokernel profile [--json] [--start N] [--backend B]\n"
	"                              -- CMD [ARGS...]\n"
	"\n"
	"Ranks a model's GPU kernel time by op.  TRACE is a PyTorch profiler\n"
	"chrome trace (export_chrome_trace, plain or .gz; record_shapes=True\n"
	"gives shapes); with '-- CMD' the tool runs CMD under its CUPTI\n"
	"injection library and maps the kernels by name.  Each row: the op's\n"
	"share of GPU kernel time, calls, typical shape, its floor at its\n"
	"shapes, and the Amdahl bound: the whole model's speedup if that op\n"
	"alone ran at its floor.\n"
	"\n"
	"    --json         the same as JSON\n"
	"    --start N      'git autokernel start' the top N ops at their typical\n"
	"                   shapes (an op whose branch exists is skipped) and set\n"
	"                   autokernel.<op>.share to its share of GPU time\n"
	"    --backend B    the backend to start them on, and whose measured\n"
	"                   ceilings give the floors (default: cuda)\n";

struct profile_opts {
	int json, start;
	const char *backend, *trace;
	const char **cmd;       /* after "--", NULL-terminated */
};

static int profile_timeout_s(void)
{
	int s = config_int("autokernel.profileTimeout", 3600);

	/* in ms it must fit an int: at most about three weeks */
	return s > 0 ? (s < 2000000 ? s : 2000000) : 3600;
}

static int parse_profile(int argc, char **argv, struct profile_opts *o)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "start", required_argument, NULL, 's' },
		{ "backend", required_argument, NULL, 'b' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int dashdash = argc, opt;
	char *end;

	/* everything after "--" is the command, options and all */
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--")) {
			dashdash = i;
			break;
		}
	while ((opt = getopt_long(dashdash, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 'j':
			o->json = 1;
			break;
		case 's':
			o->start = (int)strtol(optarg, &end, 10);
			if (*end || o->start < 1) {
				error("--start needs a count of ops, not '%s'",
				      optarg);
				return 2;
			}
			break;
		case 'b':
			o->backend = optarg;
			break;
		default:
			return usage_with(usage_profile, opt == 'h') ? 2 : -1;
		}
	}
	if (dashdash < argc) {
		if (optind != dashdash || dashdash + 1 >= argc)
			return usage_with(usage_profile, 0);
		o->cmd = (const char **)argv + dashdash + 1;
	} else {
		if (optind != argc - 1)
			return usage_with(usage_profile, 0);
		o->trace = argv[optind];
	}
	if (!o->backend)
		o->backend = "cuda";
	return 0;
}

/* python, python3, python3.12, or a script named *.py */
static int is_python(const char *cmd)
{
	const char *base = strrchr(cmd, '/') ? strrchr(cmd, '/') + 1 : cmd;
	size_t n = strlen(base);

	return starts_with(base, "python") ||
	       (n > 3 && !strcmp(base + n - 3, ".py"));
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/*
 * The traces python/ak_profile/sitecustomize.py wrote in dir, one per
 * Python process that imported torch, in name order; how many, or -1.
 */
static int read_torch_traces(struct profile *p, const char *dir)
{
	struct strvec names = STRVEC_INIT;
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)))
		if (starts_with(e->d_name, "trace-"))
			strvec_pushf(&names, "%s/%s", dir, e->d_name);
	closedir(d);
	if (names.nr)
		qsort(names.v, names.nr, sizeof(*names.v), cmp_str);
	for (size_t i = 0; i < names.nr && n >= 0; i++)
		n = profile_add_trace(p, names.v[i]) < 0 ? -1 : n + 1;
	strvec_clear(&names);
	return n;
}

/*
 * CMD's environment: the injection library where it is (lib, NULL if
 * not), and the start-up module first on PYTHONPATH, so that a Python
 * process that imports torch runs under torch.profiler with shapes.
 */
static void profiled_env(struct child *c, const char *lib, const char *dir)
{
	const char *py = getenv("PYTHONPATH");

	if (lib)
		strvec_pushf(&c->env, "CUDA_INJECTION64_PATH=%s", lib);
	strvec_pushf(&c->env, "AK_CUPTI_OUT=%s/cupti.jsonl", dir);
	strvec_pushf(&c->env, "AK_PROFILE_TRACE_DIR=%s/torch", dir);
	strvec_pushf(&c->env, "PYTHONPATH=%s/python/ak_profile%s%s",
		     ak_datadir(), py && *py ? ":" : "", py && *py ? py : "");
}

/* Reads what CMD left in dir: the torch traces, then the CUPTI records. */
static int read_profiled(struct profile *p, const char *dir,
			 const struct profile_opts *o, const char **source)
{
	struct strbuf path = STRBUF_INIT;
	int traces, ret = 1;

	strbuf_addf(&path, "%s/torch", dir);
	traces = read_torch_traces(p, path.buf);
	strbuf_reset(&path);
	strbuf_addf(&path, "%s/cupti.jsonl", dir);
	if (traces >= 0 && (access(path.buf, R_OK) ||
			    !profile_read_cupti(p, path.buf))) {
		*source = traces > 0 ? "torch" : "cupti";
		if (p->kernels)
			ret = 0;
		else
			error("no GPU kernels recorded: '%s' launched none (or "
			      "its CUDA did not load the injection library)",
			      o->cmd[0]);
	}
	strbuf_release(&path);
	return ret;
}

/*
 * Runs CMD under libak-cupti.so and the start-up module; 0, or an exit
 * code after an error.  A Python CMD may run without the library: its
 * torch.profiler records the kernels.
 */
static int run_profiled(struct profile *p, const struct profile_opts *o,
			const char **source)
{
	struct strbuf lib = STRBUF_INIT, sub = STRBUF_INIT;
	struct child c = CHILD_INIT;
	const char *tmp = getenv("TMPDIR");
	char how[128], *dir = NULL;
	int rc, ret = 3, have_lib;

	strbuf_addf(&lib, "%s/libak-cupti.so", ak_libexecdir());
	have_lib = !access(lib.buf, R_OK);
	if (!have_lib && !is_python(o->cmd[0])) {
		error("the CUPTI injection library '%s' is missing (the tool "
		      "was built without CUPTI); profile a PyTorch trace "
		      "instead", lib.buf);
		goto cleanup;
	}
	dir = tempdir_make(tmp && *tmp ? tmp : "/tmp");
	strbuf_addf(&sub, "%s/torch", dir ? dir : "");
	if (!dir || mkdir_p(sub.buf) < 0)
		goto cleanup;
	strvec_pushv(&c.args, o->cmd);
	profiled_env(&c, have_lib ? lib.buf : NULL, dir);
	c.timeout_ms = profile_timeout_s() * 1000;
	c.quiet = o->json;       /* keep stdout for the JSON */
	rc = run_child(&c);
	ret = 1;
	if (rc) {
		child_describe(&c, rc, how, sizeof(how));
		error("'%s' %s%s", o->cmd[0], how, c.timed_out ?
		      " (autokernel.profileTimeout)" : "");
	} else {
		ret = read_profiled(p, dir, o, source);
	}
cleanup:
	tempdir_remove(dir);
	free(dir);
	child_release(&c);
	strbuf_release(&lib);
	strbuf_release(&sub);
	return ret;
}

/* A call's layout by name ("half"), or NULL: unknown, or the op has one. */
static const char *layout_name(const struct op *op,
			       const struct prof_shape *g)
{
	return g ? op_layout_name(op, g->layout) : NULL;
}

static json_t *layout_json(const struct op *op, const struct prof_shape *g)
{
	const char *l = layout_name(op, g);

	return l ? json_string(l) : json_null();
}

static void shape_text(char *buf, size_t len, const struct prof_shape *g)
{
	char s[96];

	if (!g) {
		snprintf(buf, len, "-");
		return;
	}
	shape_format(&g->s, s, sizeof(s));
	snprintf(buf, len, "%s%s%s", s, g->dt_known ? " " : "",
		 g->dt_known ? dtype_name(g->dt) : "");
}

/* Words of s on lines of at most width columns. */
static void print_wrapped(const char *s, int width)
{
	int col = 0;

	while (*s) {
		int n = (int)strcspn(s, " ");

		if (col && col + 1 + n > width) {
			putchar('\n');
			col = 0;
		}
		if (col) {
			putchar(' ');
			col++;
		}
		printf("%.*s", n, s);
		col += n;
		s += n;
		s += strspn(s, " ");
	}
	putchar('\n');
}

static void ceilings_text(struct strbuf *sb, const struct profile *p)
{
	const struct prof_ceilings *c = &p->ceil;

	if (c->measured) {
		strbuf_addf(sb, "Floors from the ceilings measured on the "
			    "device ('%s'): copy %.0f GB/s", c->origin,
			    c->copy_gbps);
		if (c->measured_matrix)
			strbuf_addf(sb, ", matrix %.0f TFLOP/s f16, %.0f bf16, "
				    "%.0f f32.", c->tflops[AK_F16],
				    c->tflops[AK_BF16], c->tflops[AK_F32]);
		else
			strbuf_addf(sb, ", matrix %.0f TFLOP/s (default H200 "
				    "figure).", c->tflops[AK_F16]);
		return;
	}
	strbuf_addf(sb, "Floors from default H200 figures: copy %.0f GB/s, "
		    "matrix %.0f TFLOP/s f16/bf16, %.0f f32 (no measured "
		    "ceilings for %s%s%s; 'git autokernel init' on it measures "
		    "them).", c->copy_gbps, c->tflops[AK_F16], c->tflops[AK_F32],
		    p->device ? "'" : "", p->device ? p->device : "the device",
		    p->device ? "'" : "");
}

/* What a layout means, in the model's words. */
static const struct {
	const char *layout, *says;
} layout_notes[] = {
	{ "half", "the half-split layout, x[i] with x[i+D/2] (rotate_half: "
	  "Llama, Mistral, Qwen)" },
	{ "interleaved", "the interleaved layout, x[2i] with x[2i+1] "
	  "(rotate_every_two, complex products: GPT-J, Meta's Llama)" },
};

static void layout_note(struct strbuf *sb, const struct prof_op *o)
{
	const char *l = layout_name(o->op, o->typical);

	for (size_t i = 0; l && i < ARRAY_SIZE(layout_notes); i++)
		if (!strcmp(l, layout_notes[i].layout))
			strbuf_addf(sb, "%s: %s; --start starts it with "
				    "--layout %s. ", o->op->name,
				    layout_notes[i].says, l);
}

static void print_table(const struct profile *p,
			const struct profile_opts *o)
{
	struct strbuf sb = STRBUF_INIT, what = STRBUF_INIT;
	int shapes = 0;

	if (o->trace)
		strbuf_addstr(&what, o->trace);
	for (int i = 0; o->cmd && o->cmd[i] && what.len < 60; i++)
		strbuf_addf(&what, "%s%s", i ? " " : "", o->cmd[i]);
	printf("%s: %.3f ms of GPU kernel time in %ld kernels%s%s\n",
	       what.buf, p->total_us / 1000, p->kernels,
	       p->device ? " on " : "", p->device ? p->device : "");
	strbuf_release(&what);
	printf("\n%-16s %6s %8s %6s  %-20s %9s %6s %7s\n", "op", "share",
	       "time(ms)", "calls", "typical shape", "floor(ms)", "bound",
	       "if free");
	for (int i = 0; i < p->nr_rank; i++) {
		const struct prof_op *op = p->rank[i];
		char shape[128], fl[32] = "-", bd[32] = "-", lim[32] = "inf";

		shape_text(shape, sizeof(shape), op->typical);
		if (op->floor_us >= 0) {
			snprintf(fl, sizeof(fl), "%.4f", op->floor_us / 1000);
			snprintf(bd, sizeof(bd), "%.2fx", op->bound);
			shapes++;
		}
		if (op->limit > 0)
			snprintf(lim, sizeof(lim), "%.2fx", op->limit);
		printf("%-16s %5.1f%% %8.3f %6ld  %-20s %9s %6s %7s\n",
		       op->op->name, 100 * op->share, op->us / 1000, op->calls,
		       shape, fl, bd, lim);
	}
	if (p->other.kernels) {
		printf("%-16s %5.1f%% %8.3f %6ld  ", "not covered",
		       100 * p->other.share, p->other.us / 1000, p->other.calls);
		for (size_t i = 0; i < p->nr_names && i < 3; i++)
			printf("%s%.40s %.1f%%", i ? ", " : "",
			       p->top_names[i]->name,
			       100 * p->top_names[i]->us / p->total_us);
		printf("%s\n", p->nr_names > 3 ? ", ..." : "");
	}
	for (int i = 0; i < p->nr_rank; i++)
		layout_note(&sb, p->rank[i]);
	strbuf_addstr(&sb, "bound: the whole model's speedup if that op alone "
		      "ran at its floor; if free: if it took no time (Amdahl). ");
	if (shapes)
		ceilings_text(&sb, p);
	else
		strbuf_addf(&sb, "No shapes, so no floors: %s.", o->trace ?
			    "record the trace with record_shapes=True" :
			    "kernel names carry none, and no CPU ops say what "
			    "the not covered kernels are part of (a PyTorch "
			    "program run as 'profile -- python3 ...' is "
			    "recorded with its ops and shapes)");
	if (p->memcpy_us > 0)
		strbuf_addf(&sb, " Copies and fills (%.3f ms) are not kernels "
			    "and are not counted.", p->memcpy_us / 1000);
	putchar('\n');
	print_wrapped(sb.buf, 78);
	strbuf_release(&sb);
}

static json_t *shape_json(const struct prof_shape *g)
{
	char s[96];

	if (!g || !g->s.n)
		return json_null();
	shape_format(&g->s, s, sizeof(s));
	return json_string(s);
}

static json_t *num_or_null(double v, int ok)
{
	return ok ? json_real(v) : json_null();
}

static json_t *op_json(const struct profile *p, const struct prof_op *o)
{
	json_t *r = json_object(), *shapes = json_array();

	json_object_set_new(r, "op", json_string(o->op->name));
	json_object_set_new(r, "share", json_real(o->share));
	json_object_set_new(r, "time_ms", json_real(o->us / 1000));
	json_object_set_new(r, "kernels", json_integer(o->kernels));
	json_object_set_new(r, "calls", json_integer(o->calls));
	json_object_set_new(r, "shape", shape_json(o->typical));
	json_object_set_new(r, "dtype", o->typical && o->typical->dt_known ?
			    json_string(dtype_name(o->typical->dt)) :
			    json_null());
	if (o->op->layouts)
		json_object_set_new(r, "layout",
				    layout_json(o->op, o->typical));
	json_object_set_new(r, "floor_ms", num_or_null(o->floor_us / 1000,
						       o->floor_us >= 0));
	json_object_set_new(r, "bound", num_or_null(o->bound, o->bound > 0));
	json_object_set_new(r, "limit", num_or_null(o->limit, o->limit > 0));
	for (size_t i = 0; i < o->nr_shapes; i++) {
		const struct prof_shape *g = &o->shapes[i];

		json_t *e = json_pack("{s:o,s:o,s:f,s:I}",
			"shape", shape_json(g), "dtype", g->dt_known ?
			json_string(dtype_name(g->dt)) : json_null(),
			"share", p->total_us > 0 ? g->us / p->total_us : 0.0,
			"calls", (json_int_t)g->calls);

		if (o->op->layouts)
			json_object_set_new(e, "layout", layout_json(o->op, g));
		json_array_append_new(shapes, e);
	}
	json_object_set_new(r, "shapes", shapes);
	return r;
}

static json_t *profile_json(const struct profile *p, const char *source,
			    const struct profile_opts *o)
{
	const struct prof_ceilings *c = &p->ceil;
	json_t *r = json_object(), *a = json_array(), *top = json_array();
	json_t *cmd = json_array();

	json_object_set_new(r, "source", json_string(source));
	if (o->trace) {
		json_object_set_new(r, "trace", json_string(o->trace));
	} else {
		for (int i = 0; o->cmd[i]; i++)
			json_array_append_new(cmd, json_string(o->cmd[i]));
		json_object_set(r, "command", cmd);
	}
	json_decref(cmd);
	json_object_set_new(r, "device", p->device ? json_string(p->device) :
			    json_null());
	json_object_set_new(r, "total_ms", json_real(p->total_us / 1000));
	json_object_set_new(r, "kernels", json_integer(p->kernels));
	json_object_set_new(r, "memcpy_ms", json_real(p->memcpy_us / 1000));
	json_object_set_new(r, "ceilings", json_pack("{s:s,s:o,s:f,s:{s:f,s:f,s:f}}",
		"source", c->measured ? "measured" : "default H200",
		"file", c->measured ? json_string(c->origin) : json_null(),
		"copy_gbps", c->copy_gbps, "matrix_tflops",
		"f16", c->tflops[AK_F16], "bf16", c->tflops[AK_BF16],
		"f32", c->tflops[AK_F32]));
	for (int i = 0; i < p->nr_rank; i++)
		json_array_append_new(a, op_json(p, p->rank[i]));
	json_object_set_new(r, "ops", a);
	for (size_t i = 0; i < p->nr_names && i < 10; i++)
		json_array_append_new(top, json_pack("{s:s,s:f,s:f,s:I}",
			"name", p->top_names[i]->name, "share",
			p->top_names[i]->us / p->total_us, "time_ms",
			p->top_names[i]->us / 1000,
			"kernels", (json_int_t)p->top_names[i]->kernels));
	json_object_set_new(r, "not_covered", json_pack("{s:f,s:f,s:I,s:I,s:o}",
		"share", p->other.share, "time_ms", p->other.us / 1000,
		"kernels", (json_int_t)p->other.kernels,
		"calls", (json_int_t)p->other.calls, "top", top));
	return r;
}

static int branch_exists(const char *name)
{
	git_reference *ref = NULL;
	struct strbuf b = STRBUF_INIT;
	int e;

	strbuf_addf(&b, "autokernel/%s", name);
	e = git_branch_lookup(&ref, repo_need(), b.buf, GIT_BRANCH_LOCAL);
	git_reference_free(ref);
	strbuf_release(&b);
	return e == 0;
}

/* The model's dtype first, so that start benchmarks it. */
static void dtype_list(char *buf, size_t len, const struct prof_shape *g)
{
	static const enum ak_dtype all[] = { AK_F16, AK_BF16, AK_F32 };
	size_t n;

	snprintf(buf, len, "%s", dtype_name(g->dt));
	for (size_t i = 0; i < ARRAY_SIZE(all); i++) {
		n = strlen(buf);
		if (all[i] != g->dt)
			snprintf(buf + n, len - n, ",%s", dtype_name(all[i]));
	}
}

static int start_one(const struct prof_op *o, const struct profile_opts *opts,
		     const char *orig)
{
	struct child c = CHILD_INIT;
	struct strbuf key = STRBUF_INIT, share = STRBUF_INIT;
	const char *name = o->op->name;
	char shape[96], dts[32], how[128];
	char *cur = repo_current_branch();
	int rc;

	/* each branch starts from where the user was, not from the last */
	if (orig && (!cur || strcmp(cur, orig)))
		git_cmd(NULL, 1, "checkout", "-q", orig, NULL);
	free(cur);
	strvec_pushl(&c.args, ak_exe(), "start", name, "--name", name,
		     "--backend", opts->backend, NULL);
	if (o->typical) {
		struct strvec specs = STRVEC_INIT;

		shape_format(&o->typical->s, shape, sizeof(shape));
		/* the workload: every traced shape, by its share */
		profile_workload(o, &specs);
		for (size_t i = 0; i < specs.nr; i++)
			strvec_pushl(&c.args, "--shape", specs.v[i], NULL);
		strvec_clear(&specs);
		if (o->typical->dt_known) {
			dtype_list(dts, sizeof(dts), o->typical);
			strvec_pushl(&c.args, "--dtype", dts, NULL);
		}
		if (layout_name(o->op, o->typical))
			strvec_pushl(&c.args, "--layout",
				     layout_name(o->op, o->typical), NULL);
	}
	fprintf(opts->json ? stderr : stdout, "starting %s (%.1f%% of GPU "
		"time) at %s\n", name, 100 * o->share,
		o->typical ? shape : "its bench shape (no shape recorded)");
	fflush(stdout);
	c.timeout_ms = profile_timeout_s() * 1000;
	c.quiet = opts->json;
	c.no_stdin = 1;
	rc = run_child(&c);
	if (rc) {
		child_describe(&c, rc, how, sizeof(how));
		error("'git autokernel start %s' %s", name, how);
	} else {
		strbuf_addf(&key, "autokernel.%s.share", name);
		strbuf_addf(&share, "%.4f", o->share);
		if (git_cmd(NULL, 0, "config", key.buf, share.buf, NULL))
			rc = error("unable to set '%s'", key.buf);
	}
	child_release(&c);
	strbuf_release(&key);
	strbuf_release(&share);
	return rc ? -1 : 0;
}

/* Starts the top n ops; 0, or 1 if one could not be started. */
static int start_ops(const struct profile *p, const struct profile_opts *o,
		     json_t *out)
{
	struct strbuf head = STRBUF_INIT;
	json_t *started = json_array();
	char *orig;
	int ret = 0;

	repo_need();
	orig = repo_current_branch();
	if (!orig && !git_cmd(&head, 1, "rev-parse", "HEAD", NULL)) {
		strbuf_trim(&head);
		orig = strbuf_detach(&head, NULL);
	}
	if (!p->nr_rank)
		warning("nothing to start: no kernel maps to an op");
	for (int i = 0; i < p->nr_rank && i < o->start; i++) {
		const struct prof_op *op = p->rank[i];
		const char *status = "started";

		if (branch_exists(op->op->name)) {
			fprintf(o->json ? stderr : stdout, "autokernel/%s "
				"exists: skipped\n", op->op->name);
			status = "exists";
		} else if (start_one(op, o, orig) < 0) {
			status = "failed";
			ret = 1;
		}
		json_array_append_new(started, json_pack("{s:s,s:s,s:f}",
			"op", op->op->name, "status", status,
			"share", op->share));
	}
	if (orig) {
		char *cur = repo_current_branch();

		if (!cur || strcmp(cur, orig))
			git_cmd(NULL, 1, "checkout", "-q", orig, NULL);
		free(cur);
	}
	if (out)
		json_object_set_new(out, "started", started);
	else
		json_decref(started);
	if (!o->json && p->nr_rank)
		printf("next: git checkout autokernel/%s && git autokernel "
		       "run\n", p->rank[0]->op->name);
	free(orig);
	strbuf_release(&head);
	return ret;
}

int cmd_profile(int argc, char **argv)
{
	struct profile_opts o = { 0 };
	struct profile p;
	struct prof_ceilings ceil;
	const char *source = "cupti";
	json_t *j = NULL;
	int rc;

	if ((rc = parse_profile(argc, argv, &o)))
		return rc < 0 ? 0 : rc;
	profile_init(&p);
	if (o.trace) {
		source = "trace";
		rc = profile_read_trace(&p, o.trace) < 0 ? 1 : 0;
	} else {
		rc = run_profiled(&p, &o, &source);
	}
	if (rc)
		goto cleanup;
	prof_ceilings_find(&ceil, p.device, o.backend);
	profile_finish(&p, &ceil);
	if (o.json)
		j = profile_json(&p, source, &o);
	else
		print_table(&p, &o);
	if (o.start) {
		if (!o.json)
			putchar('\n');
		rc = start_ops(&p, &o, j);
	} else if (!o.json && p.nr_rank) {
		printf("next: 'git autokernel profile --start N ...' starts "
		       "the top N ops\n");
	}
	if (j) {
		json_dumpf(j, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
		putchar('\n');
	}
cleanup:
	json_decref(j);
	profile_release(&p);
	return rc;
}
