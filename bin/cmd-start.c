/*
 * cmd-start.c: `start <op>`: a branch, a kernel directory, a baseline.
 */
#include <ctype.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "backends/build.h"
#include "bin/builtin.h"
#include "ops/dtype.h"
#include "judge/judge.h"
#include "lib/paths.h"
#include "ops/problem.h"
#include "lib/records.h"
#include "lib/repo.h"
#include "lib/result.h"
#include "judge/setup.h"
#include "profile/profile.h"

static const char usage_start[] =
	"usage: git autokernel start <op> [--backend B] [--dtype D[,D..]]\n"
	"                            [--shape S[:W[:D]]]... [--from-profile TRACE]\n"
	"                            [--name N] [--from FILE] [--naive]\n"
	"                            [--problem FILE] [--layout L]\n"
	"\n"
	"Creates branch autokernel/<name> (name: the op), writes\n"
	"<name>/problem.json and the kernel (the tool's starter, its simplest\n"
	"version with --naive, or FILE), verifies and benchmarks it, and\n"
	"commits it as the baseline.  Each --shape adds a shape to the workload\n"
	"the kernel is judged at, with weight W (its share of the op's time,\n"
	"default 1) and dtype D; --from-profile takes the workload from a\n"
	"profiler trace of the model.  --dtype sets the dtypes verified (the\n"
	"first is benchmarked); --problem takes shapes, tolerances and seed\n"
	"from a problem.json of your own; --layout picks the layout of an op\n"
	"that has several (rotary_embedding: interleaved, the default, or\n"
	"half: rotate_half's x[i] with x[i+D/2]).\n";

struct start_opts {
	const char *op, *backend, *dtype, *name, *from, *problem, *trace;
	const char *layout;
	struct strvec shapes;   /* "S[:W[:D]]" */
	int naive;
};

static int valid_name(const char *s)
{
	if (!*s || *s == '.' || *s == '-' || strlen(s) > 100)
		return 0;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && !strchr("._-", *s))
			return 0;
	return 1;
}

static int starter_path(struct strbuf *path, const struct start_opts *o,
			const char *backend)
{
	const char *ext = backend_ext(backend);

	if (o->from) {
		strbuf_addstr(path, o->from);
		return 0;
	}
	strbuf_addf(path, "%s/kernels/%s/%s%s%s", ak_datadir(), backend,
		    o->naive ? "naive/" : "", o->op, ext);
	if (access(path->buf, R_OK))
		return error("no %s%s starter for '%s' at '%s'",
			     o->naive ? "naive " : "", backend, o->op, path->buf);
	return 0;
}

static int parse_start(int argc, char **argv, struct start_opts *o)
{
	static const struct option opts[] = {
		{ "backend", required_argument, NULL, 'b' },
		{ "dtype", required_argument, NULL, 'd' },
		{ "shape", required_argument, NULL, 's' },
		{ "from-profile", required_argument, NULL, 'P' },
		{ "name", required_argument, NULL, 'n' },
		{ "from", required_argument, NULL, 'f' },
		{ "naive", no_argument, NULL, 'N' },
		{ "problem", required_argument, NULL, 'p' },
		{ "layout", required_argument, NULL, 'l' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int opt;

	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 'b': o->backend = optarg; break;
		case 'd': o->dtype = optarg; break;
		case 's': strvec_push(&o->shapes, optarg); break;
		case 'P': o->trace = optarg; break;
		case 'n': o->name = optarg; break;
		case 'f': o->from = optarg; break;
		case 'N': o->naive = 1; break;
		case 'p': o->problem = optarg; break;
		case 'l': o->layout = optarg; break;
		default: return usage_with(usage_start, opt == 'h') ? 2 : -1;
		}
	}
	if (optind != argc - 1)
		return usage_with(usage_start, 0);
	o->op = argv[optind];
	if (!o->name)
		o->name = o->op;
	return 0;
}

/* dt to the front of p's dtypes: the one the benchmark's first shape
 * runs in is the one the stages try first. */
static void dtype_first(struct problem *p, enum ak_dtype dt)
{
	for (int i = p->n_dtypes - 1; i > 0; i--)
		if (p->dtypes[i] == dt) {
			p->dtypes[i] = p->dtypes[0];
			p->dtypes[0] = dt;
		}
}

static int make_problem(struct problem *p, const struct start_opts *o,
			const char *backend)
{
	const struct op *op = op_find(o->op);

	if (!op)
		return error("unknown op '%s' (see 'git autokernel ops')", o->op);
	if (o->problem) {
		if (problem_load(p, o->problem) < 0)
			return -1;
		if (p->op != op)
			return error("'%s' is a problem for '%s', not '%s'",
				     o->problem, p->op->name, o->op);
		snprintf(p->backend, sizeof(p->backend), "%s", backend);
		snprintf(p->kernel, sizeof(p->kernel), "kernel%s",
			 backend_ext(backend));
	} else {
		problem_default(p, op, backend);
	}
	if (o->dtype && problem_set_dtypes(p, o->dtype) < 0)
		return -1;
	if (o->layout && problem_set_layout(p, o->layout) < 0)
		return -1;
	if (o->shapes.nr && problem_set_workload(p, o->shapes.v,
						 (int)o->shapes.nr) < 0)
		return -1;
	if (!o->dtype)
		dtype_first(p, p->work[0].dt);
	return 0;
}

/* The workload the model ran op at, from a profiler trace, into
 * o->shapes; 0 or error(). */
static int workload_from_profile(struct start_opts *o)
{
	const struct op *op = op_find(o->op);
	struct profile p;
	int ret = 0, n = 0;

	profile_init(&p);
	if (!op || profile_read_trace(&p, o->trace) < 0) {
		profile_release(&p);
		return op ? -1 : 0;     /* an unknown op is reported later */
	}
	for (int i = 0; ops[i]; i++)
		if (ops[i] == op)
			n = profile_workload(&p.op[i], &o->shapes);
	if (!n)
		ret = error("'%s' has no call of %s with a shape (was it "
			    "recorded with record_shapes=True?)", o->trace,
			    o->op);
	for (size_t i = 0; !ret && i < o->shapes.nr; i++)
		printf("workload from the profile: %s\n", o->shapes.v[i]);
	profile_release(&p);
	return ret;
}

static int branch_exists(const char *branch)
{
	git_reference *ref = NULL;
	int e = git_branch_lookup(&ref, repo_need(), branch, GIT_BRANCH_LOCAL);

	git_reference_free(ref);
	return e == 0;
}

static int write_dir(const char *dir, const struct problem *p,
		     const char *src)
{
	struct strbuf text = STRBUF_INIT, path = STRBUF_INIT;
	char *json = problem_dump(p);
	int ret = 0;

	if (strbuf_read_file(&text, src) < 0)
		ret = error_errno("unable to read '%s'", src);
	else if (mkdir_p(dir) < 0)
		ret = -1;
	if (!ret) {
		strbuf_addf(&path, "%s/problem.json", dir);
		if (write_file_atomic(path.buf, json, strlen(json)) < 0)
			ret = -1;
		strbuf_reset(&path);
		strbuf_addf(&path, "%s/%s", dir, p->kernel);
		if (!ret && write_file_atomic(path.buf, text.buf, text.len) < 0)
			ret = -1;
	}
	free(json);
	strbuf_release(&text);
	strbuf_release(&path);
	return ret;
}

/* Back to where the user was: their branch, no new branch, no dir. */
static void undo_start(const char *orig, const char *branch, const char *dir)
{
	struct strbuf ref = STRBUF_INIT;

	git_cmd(NULL, 1, "reset", "-q", "--", dir, NULL);
	git_cmd(NULL, 1, "rm", "-r", "-q", "--cached", "--ignore-unmatch",
		"--", dir, NULL);
	remove_tree(dir);
	strbuf_addf(&ref, "refs/heads/%s", orig);
	git_cmd(NULL, 1, "symbolic-ref", "HEAD", ref.buf, NULL);
	git_cmd(NULL, 1, "branch", "-q", "-D", branch, NULL);
	strbuf_release(&ref);
}

static void print_started(const char *branch, const char *name)
{
	struct result r = RESULT_INIT;
	git_oid head;
	char words[64];

	if (!repo_head(&head)) {
		json_t *note = note_read(&head);

		result_from_note(&r, note);
		json_decref(note);
	}
	printf("started %s: ", branch);
	if (!r.note) {
		printf("baseline committed\n");
	} else {
		printf("baseline %.2f us ", r.time_us);
		if (r.nr_shapes > 1)
			printf("(weighted over %zu shapes)", r.nr_shapes);
		else
			printf("at %s %s", r.bench.shape, r.bench.dtype);
		printf(", %s, on %s\n", result_floor_words(r.roofline,
		       "the floor", words, sizeof(words)), r.device_name);
	}
	printf("next: edit %s/ and 'git commit', or 'git autokernel run'\n",
	       name);
	result_release(&r);
}

/* No device, no baseline: say so (exit 3) before a branch exists. */
static int device_answers(const char *backend)
{
	struct judge j = JUDGE_INIT;
	/* judge_start() may stand in the last hello: ask the runner */
	int ok = !judge_start(&j, backend) && !judge_ready(&j);

	judge_stop(&j);
	return ok;
}

int cmd_start(int argc, char **argv)
{
	struct start_opts o = { .shapes = STRVEC_INIT };
	struct problem p;
	struct strbuf branch = STRBUF_INIT, src = STRBUF_INIT;
	struct strbuf dir = STRBUF_INIT, msg = STRBUF_INIT;
	struct strbuf pjson = STRBUF_INIT;
	char *backend = NULL, *orig = NULL;
	struct stat st;
	int rc;

	if ((rc = parse_start(argc, argv, &o)))
		return rc < 0 ? 0 : rc;
	if (o.backend) {
		backend = xstrdup(o.backend);
	} else if (o.problem) {
		if (problem_load(&p, o.problem) < 0) {
			rc = 2;
			goto cleanup;
		}
		backend = xstrdup(p.backend);
	} else {
		backend = default_backend();
	}
	rc = 2;
	if (!valid_name(o.name)) {
		error("bad experiment name '%s' (letters, digits, '.', '_', '-')",
		      o.name);
		goto cleanup;
	}
	if (!backend_known(backend)) {
		error("unknown backend '%s' (host, cuda, hip, triton)", backend);
		goto cleanup;
	}
	if ((o.trace && workload_from_profile(&o) < 0) ||
	    make_problem(&p, &o, backend) < 0 || starter_path(&src, &o, backend))
		goto cleanup;
	rc = 3;
	strbuf_addf(&pjson, "%s/problem.json", o.name);
	problem_loose_tolerances(&p, pjson.buf, NULL);
	strbuf_addf(&branch, "autokernel/%s", o.name);
	strbuf_addf(&dir, "%s%s", repo_workdir(), o.name);
	if (branch_exists(branch.buf)) {
		error("branch '%s' already exists: check it out and 'git "
		      "autokernel run', or choose another --name", branch.buf);
		goto cleanup;
	}
	if (!lstat(dir.buf, &st)) {
		error("'%s' already exists in the work tree: choose another "
		      "--name", o.name);
		goto cleanup;
	}
	if (!device_answers(backend) ||
	    (!hooks_installed() && setup_repository(1) < 0))
		goto cleanup;
	orig = repo_current_branch();
	if (git_cmd(NULL, 0, "checkout", "-q", "-b", branch.buf, NULL)) {
		error("unable to create branch '%s'", branch.buf);
		goto cleanup;
	}
	if (write_dir(dir.buf, &p, src.buf) < 0 ||
	    git_cmd(NULL, 0, "add", "--", o.name, NULL)) {
		undo_start(orig ? orig : "main", branch.buf, o.name);
		goto cleanup;
	}
	strbuf_addf(&msg, "%s: baseline, the %s%s starter", o.op,
		    o.from ? "given" : backend, o.naive ? " naive" : "");
	if (git_cmd(NULL, 0, "commit", "-q", "-m", msg.buf, "--", o.name,
		    NULL)) {
		error("the starter was not accepted as the baseline (above); "
		      "'%s' is not created", branch.buf);
		undo_start(orig ? orig : "main", branch.buf, o.name);
		rc = 1;
		goto cleanup;
	}
	print_started(branch.buf, o.name);
	rc = 0;
cleanup:
	free(backend);
	free(orig);
	strbuf_release(&branch);
	strbuf_release(&src);
	strbuf_release(&dir);
	strbuf_release(&msg);
	strvec_clear(&o.shapes);
	strbuf_release(&pjson);
	return rc;
}
