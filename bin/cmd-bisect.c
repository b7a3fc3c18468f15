/*
 * cmd-bisect.c: `bisect GOOD BAD`: git bisect with the terms fast and
 * slow, every step `git autokernel bench <dir> --against GOOD`, whose
 * exit codes are bisect run's (0 fast, 1 slow, 125 cannot test).
 *
 * The repository is left as it was found whatever happens: `git bisect
 * reset` runs after success, after an error and after SIGINT, SIGTERM or
 * SIGHUP.  While the bisect runs this command holds those signals itself
 * (main's handlers would kill the children and die at once): it passes
 * them on to the bisect as SIGTERM, waits for it, resets, and only then
 * dies of the signal.
 */
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "bin/builtin.h"
#include "judge/judge.h"
#include "lib/paths.h"
#include "lib/repo.h"
#include "lib/run.h"

static const char usage_bisect[] =
	"usage: git autokernel bisect <good> <bad> [--threshold <p>]\n"
	"                             [--shape S] [--json]\n"
	"\n"
	"Finds the first commit after <good> whose kernel is slower than\n"
	"<good>'s by more than the threshold (default 5%): git bisect with\n"
	"the terms fast and slow, each step timed interleaved against <good>\n"
	"by 'git autokernel bench --against' (the weighted total of the\n"
	"workload's shapes, or the one --shape names); a commit that does not build\n"
	"is skipped.  The repository is left as found, also when\n"
	"interrupted.\n"
	"Exit 0 found, 1 no slow commit, 2 usage, 3 a bisect in progress, a\n"
	"dirty work tree, or <good> cannot be measured.\n";

#define HEXSZ GIT_OID_HEXSZ

struct bisect {
	char good[HEXSZ + 1], bad[HEXSZ + 1];
	char name[256];
	double threshold;
	const char *shape;      /* --shape: bisect one shape */
	int json;
	char first[HEXSZ + 1];          /* the first slow commit */
	struct strbuf candidates;       /* when skips left several */
};

struct timing {
	double good_us, rev_us; /* 0 when only the ratio is known */
	double ratio;
	char shape[64], dtype[16];
};

static volatile pid_t run_pid;
static volatile sig_atomic_t caught;

static void on_signal(int sig)
{
	if (!caught)
		caught = sig;
	run_interrupted = sig;
	if (run_pid > 0)
		kill(-run_pid, SIGTERM);
}

static const int signals[] = { SIGINT, SIGTERM, SIGHUP };

static void hold_signals(struct sigaction *old)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < ARRAY_SIZE(signals); i++)
		sigaction(signals[i], &sa, &old[i]);
}

static void release_signals(const struct sigaction *old)
{
	for (size_t i = 0; i < ARRAY_SIZE(signals); i++)
		sigaction(signals[i], &old[i], NULL);
}

/* The full id of rev's commit into hex; 0 or error(). */
static int resolve(char *hex, const char *rev)
{
	git_object *obj = NULL, *commit = NULL;
	int ret = 0;

	if (git_revparse_single(&obj, repo_need(), rev) < 0 ||
	    git_object_peel(&commit, obj, GIT_OBJECT_COMMIT) < 0)
		ret = error("'%s' is not a commit", rev);
	else
		git_oid_tostr(hex, HEXSZ + 1, git_object_id(commit));
	git_object_free(obj);
	git_object_free(commit);
	return ret;
}

/* 0 when a bisect may start here; 3 after an error. */
static int check_state(void)
{
	struct strbuf path = STRBUF_INIT, out = STRBUF_INIT;
	int ret = 0;

	strbuf_addf(&path, "%sBISECT_START", repo_gitdir());
	if (!access(path.buf, F_OK)) {
		ret = error("a bisect is already in progress; finish it or "
			    "'git bisect reset' first");
		goto cleanup;
	}
	if (git_cmd(&out, 1, "status", "--porcelain", "--untracked-files=no",
		    NULL)) {
		ret = error("unable to read the work tree's status");
		goto cleanup;
	}
	if (out.len)
		ret = error("the work tree has changes to tracked files; "
			    "commit or stash them first:\n%s", out.buf);
cleanup:
	strbuf_release(&path);
	strbuf_release(&out);
	return ret ? 3 : 0;
}

/* The experiment: the branch's, else the one directory of bad's tree
 * that holds a problem.json.  0 or error(). */
static int find_name(struct bisect *b)
{
	char *name = repo_branch_name();
	git_object *obj = NULL;
	git_tree *tree = NULL;
	int found = 0;

	if (name) {
		snprintf(b->name, sizeof(b->name), "%s", name);
		free(name);
		return 0;
	}
	if (git_revparse_single(&obj, repo_need(), b->bad) == 0 &&
	    git_object_peel((git_object **)&tree, obj, GIT_OBJECT_TREE) == 0) {
		for (size_t i = 0; i < git_tree_entrycount(tree); i++) {
			const git_tree_entry *e;
			git_tree_entry *p = NULL;
			struct strbuf path = STRBUF_INIT;

			e = git_tree_entry_byindex(tree, i);
			strbuf_addf(&path, "%s/problem.json",
				    git_tree_entry_name(e));
			if (git_tree_entry_type(e) == GIT_OBJECT_TREE &&
			    git_tree_entry_bypath(&p, tree, path.buf) == 0 &&
			    !found++)
				snprintf(b->name, sizeof(b->name), "%s",
					 git_tree_entry_name(e));
			git_tree_entry_free(p);
			strbuf_release(&path);
		}
	}
	git_tree_free(tree);
	git_object_free(obj);
	if (found != 1)
		return error("not on an autokernel/* branch and %s kernel "
			     "directories in '%.7s': check out the branch of "
			     "the experiment", found ? "several" : "no",
			     b->bad);
	return 0;
}

static double total(json_t *wl, const char *key)
{
	return json_number_value(json_object_get(json_object_get(wl, "total"),
						 key));
}

/* The problem's workload, or the one shape --shape names; 0 or error(). */
static int bisect_workload(struct problem *p, const struct bisect *b)
{
	char err[256];

	if (!b->shape)
		return 0;
	if (shape_parse(&p->work[0].s, p->op, b->shape, err, sizeof(err)) < 0)
		return error("%s", err);
	p->work[0].weight = 1;
	p->work[0].dt = p->dtypes[0];
	p->n_work = 1;
	return 0;
}

/* rev's kernel timed interleaved with good's over the workload: 0, 1
 * when rev cannot be built or timed, 3 when good cannot. */
static int measure(struct timing *t, const struct bisect *b, const char *rev)
{
	static const int slots[] = { 0, 1 };
	struct candidate c = CANDIDATE_INIT, g = CANDIDATE_INIT;
	struct judge j = JUDGE_INIT;
	struct strbuf v = STRBUF_INIT;
	json_t *res = NULL, *sh;
	int rc;

	fprintf(stderr, "bisect: timing %.7s against %.7s\n", rev, b->good);
	if (candidate_load(&g, b->good, b->name) ||
	    judge_start(&j, g.p.backend) || judge_build(&j, &g, 1, &v)) {
		error("the kernel of '%.7s' cannot be measured%s%s", b->good,
		      v.len ? ": " : "", v.buf);
		rc = 3;
		goto cleanup;
	}
	rc = 1;
	if (candidate_load(&c, rev, b->name) || bisect_workload(&c.p, b) ||
	    judge_build(&j, &c, 0, &v) ||
	    judge_run_bench(&j, &c.p, slots, 2, 1.0, NULL, &res, &v)) {
		warning("the kernel of '%.7s' cannot be measured%s%s", rev,
			v.len ? ": " : "", v.buf);
		goto cleanup;
	}
	t->rev_us = total(res, "candidate_us");
	t->good_us = total(res, "best_us");
	sh = json_array_get(json_object_get(res, "shapes"), 0);
	snprintf(t->shape, sizeof(t->shape), "%s", c.p.n_work > 1 ?
		 "workload" : json_string_value(json_object_get(sh, "shape")));
	snprintf(t->dtype, sizeof(t->dtype), "%s",
		 json_string_value(json_object_get(sh, "dtype")));
	rc = t->rev_us > 0 && t->good_us > 0 ? 0 : 1;
	if (!rc)
		t->ratio = t->rev_us / t->good_us;
cleanup:
	json_decref(res);
	judge_stop(&j);
	candidate_release(&c);
	candidate_release(&g);
	strbuf_release(&v);
	return rc;
}

static int is_hex_id(const char *s, size_t len)
{
	if (len < HEXSZ)
		return 0;
	for (size_t i = 0; i < HEXSZ; i++)
		if (!strchr("0123456789abcdef", s[i]))
			return 0;
	return 1;
}

#define FIRST " is the first slow commit"

/* What git bisect run concluded: b->first, or b->candidates. */
static void parse_log(struct bisect *b, const char *log)
{
	const char *p = log, *nl;
	int in_list = 0;

	for (; *p; p = nl + 1) {
		size_t len;

		nl = strchrnul(p, '\n');
		len = nl - p;
		if (is_hex_id(p, len) && len - HEXSZ == strlen(FIRST) &&
		    !strncmp(p + HEXSZ, FIRST, len - HEXSZ))
			snprintf(b->first, sizeof(b->first), "%.*s", HEXSZ, p);
		else if (strstr(p, "could be any of:") &&
			 strstr(p, "could be any of:") < nl)
			in_list = 1;
		else if (in_list && len == HEXSZ && is_hex_id(p, len))
			strbuf_addf(&b->candidates, "%.*s\n", HEXSZ, p);
		else
			in_list = 0;
		if (!*nl)
			break;
	}
}

/* Generous: every step may build two kernels and time them. */
static int run_limit_ms(const struct bisect *b)
{
	struct strbuf out = STRBUF_INIT, range = STRBUF_INIT;
	double n, steps;

	strbuf_addf(&range, "%s..%s", b->good, b->bad);
	git_cmd(&out, 1, "rev-list", "--count", range.buf, NULL);
	n = atof(out.buf);
	steps = 2 * ceil(log2(n + 1)) + 4;
	strbuf_release(&out);
	strbuf_release(&range);
	return steps * 600000 < 24 * 3600000.0 ? (int)(steps * 600000) :
		24 * 3600000;
}

/* Copies the bisect's output to stderr and into log until it closes. */
static void follow(struct child *c, struct strbuf *log, int limit_ms)
{
	long long start = now_ns(), signalled = 0, killed = 0;

	while (c->out_fd >= 0) {
		struct pollfd p = { c->out_fd, POLLIN, 0 };
		long long now = now_ns();
		char buf[4096];
		ssize_t k;

		if (caught && !signalled)
			signalled = now;
		if (!killed && ((signalled && now - signalled > 5000000000LL) ||
				now - start > limit_ms * 1000000LL)) {
			if (!signalled)
				error("git bisect run timed out after %d s",
				      limit_ms / 1000);
			kill(-c->pid, SIGKILL);
			killed = now;
		}
		if (killed && now - killed > 2000000000LL)
			break;  /* a grandchild holds the pipe: stop reading */
		if (poll(&p, 1, 200) <= 0)
			continue;
		k = read(c->out_fd, buf, sizeof(buf));
		if (k > 0) {
			fwrite(buf, 1, k, stderr);
			strbuf_add(log, buf, k);
		} else if (k == 0) {
			break;
		}
	}
}

/* git bisect run; its exit status, or -1. */
static int run_bisect(struct bisect *b, struct strbuf *log)
{
	struct child c = CHILD_INIT;
	char threshold[32];
	int rc, limit = run_limit_ms(b);

	snprintf(threshold, sizeof(threshold), "%g%%", b->threshold * 100);
	strvec_pushl(&c.args, "git", "bisect", "run", ak_exe(), "bench", NULL);
	strvec_pushf(&c.args, "%s%s", repo_workdir(), b->name);
	strvec_pushl(&c.args, "--against", b->good, "--threshold", threshold,
		     NULL);
	if (b->shape)
		strvec_pushl(&c.args, "--shape", b->shape, NULL);
	/* the steps must die of our SIGTERM, not finish their bench */
	strvec_push(&c.env, "AUTOKERNEL_SOFT_SIGNALS");
	c.want_stdout = 1;
	c.merge_err = 1;
	c.no_stdin = 1;
	if (start_child(&c) < 0) {
		child_release(&c);
		return -1;
	}
	run_pid = c.pid;
	if (caught)
		kill(-c.pid, SIGTERM);
	follow(&c, log, limit);
	run_pid = 0;
	rc = finish_child(&c, 10000);
	child_release(&c);
	return rc;
}

/* Starts, runs and always resets the bisect; the run's output into
 * log.  0, 3, or 128+N after signal N (when the signal did not kill). */
static int bisect(struct bisect *b, struct strbuf *log)
{
	struct sigaction old[ARRAY_SIZE(signals)];
	struct strbuf out = STRBUF_INIT;
	int rc = 0, run_rc = 0, sig;

	hold_signals(old);
	if (git_cmd(&out, 0, "bisect", "start", "--term-old", "fast",
		    "--term-new", "slow", b->bad, b->good, NULL)) {
		rc = error("git bisect start failed");
	} else {
		fputs(out.buf, stderr);
		if (!caught)
			run_rc = run_bisect(b, log);
		if (log->len && log->buf[log->len - 1] != '\n')
			fputc('\n', stderr);
	}
	strbuf_reset(&out);
	if (git_cmd(&out, 1, "bisect", "reset", NULL))
		rc = error("unable to end the bisect: run 'git bisect reset'");
	strbuf_release(&out);
	release_signals(old);
	if ((sig = caught)) {
		fprintf(stderr, "bisect: interrupted; %s\n", rc ? "the bisect "
			"could not be reset" : "the repository is as it was");
		raise(sig);
		return 128 + sig;
	}
	if (!rc) {
		parse_log(b, log->buf);
		if (!b->first[0] && !b->candidates.len)
			rc = error("git bisect run %s without a first slow "
				   "commit", run_rc < 0 ? "failed" : "ended");
	}
	return rc ? 3 : 0;
}

/* The ratio that the step testing hex printed ("ratio 3.214x: slow"),
 * or 0. */
static double step_ratio(const char *log, const char *hex)
{
	const char *p = log, *nl;
	int in_step = 0;
	double ratio = 0;

	for (; *p; p = nl + 1) {
		nl = strchrnul(p, '\n');
		if (*p == '[' && nl - p > HEXSZ + 1 && p[HEXSZ + 1] == ']')
			in_step = !strncmp(p + 1, hex, HEXSZ);
		else if (in_step && starts_with(p, "ratio "))
			ratio = atof(p + 6);
		if (!*nl)
			break;
	}
	return ratio;
}

static char *subject_of(const char *hex)
{
	git_oid id;
	git_commit *c = NULL;
	char *s;

	if (git_oid_fromstr(&id, hex) < 0 ||
	    git_commit_lookup(&c, repo_need(), &id) < 0)
		return xstrdup("");
	s = xstrdup(git_commit_summary(c) ? git_commit_summary(c) : "");
	git_commit_free(c);
	return s;
}

static void print_json(const struct bisect *b, const struct timing *t,
		       const char *subject)
{
	json_t *j = json_pack("{s:s,s:s,s:f,s:s,s:s}", "good", b->good, "bad",
			      b->bad, "threshold", b->threshold, "first_slow",
			      b->first, "subject", subject);

	if (t->ratio > 0)
		json_object_set_new(j, "ratio", json_real(t->ratio));
	if (t->shape[0])
		json_object_set_new(j, "bench", json_pack("{s:s,s:s}",
				    "shape", t->shape, "dtype", t->dtype));
	if (t->good_us > 0)
		json_object_set_new(j, "good_us", json_real(t->good_us));
	if (t->rev_us > 0)
		json_object_set_new(j, "slow_us", json_real(t->rev_us));
	json_dumpf(j, stdout, JSON_INDENT(2));
	putchar('\n');
	json_decref(j);
}

static void print_found(const struct bisect *b, const struct timing *t)
{
	char *subject = subject_of(b->first);

	if (b->json) {
		print_json(b, t, subject);
		free(subject);
		return;
	}
	printf("%s is the first slow commit\n    %s\n", b->first, subject);
	if (t->ratio > 0) {
		printf("%.2fx the time of %.7s (%+.0f%%)", t->ratio, b->good,
		       100 * (t->ratio - 1));
		if (t->rev_us > 0)
			printf(": %.2f us -> %.2f us", t->good_us, t->rev_us);
		if (t->shape[0])
			printf(" at %s %s", t->shape, t->dtype);
		printf("; threshold %g%%\n", 100 * b->threshold);
	}
	free(subject);
}

static int bisect_parse(int argc, char **argv, struct bisect *b)
{
	static const struct option opts[] = {
		{ "threshold", required_argument, NULL, 't' },
		{ "shape", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int opt;

	b->threshold = 0.05;
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (opt == 't') {
			if (parse_fraction(optarg, &b->threshold) < 0) {
				error("bad threshold '%s' (e.g. 5%%)", optarg);
				return EXIT_USAGE;
			}
		} else if (opt == 'j') {
			b->json = 1;
		} else if (opt == 's') {
			b->shape = optarg;
		} else {
			return usage_with(usage_bisect, opt == 'h') ? 2 : -1;
		}
	}
	if (argc - optind != 2)
		return usage_with(usage_bisect, 0);
	if (resolve(b->good, argv[optind]) < 0 ||
	    resolve(b->bad, argv[optind + 1]) < 0)
		return 2;
	return 0;
}

/* 0 when bad is a descendant of good; 2 after an error. */
static int check_range(const struct bisect *b)
{
	git_oid good, bad;

	git_oid_fromstr(&good, b->good);
	git_oid_fromstr(&bad, b->bad);
	if (git_oid_equal(&good, &bad)) {
		error("<good> and <bad> are the same commit");
		return EXIT_USAGE;
	}
	if (git_graph_descendant_of(repo_need(), &bad, &good) != 1) {
		error("'%.7s' is not an ancestor of '%.7s'", b->good, b->bad);
		return EXIT_USAGE;
	}
	return 0;
}

/* Is bad slow at all?  0 yes or unknown (t set when measured), 1 no,
 * 3 good cannot be measured. */
static int precheck(const struct bisect *b, struct timing *t)
{
	int rc = measure(t, b, b->bad);

	if (rc == 3)
		return 3;
	if (rc)
		return 0;       /* bisect trusts that bad is slow */
	fprintf(stderr, "bisect: %.7s takes %.2f us against %.2f us for "
		"%.7s (%.3fx)\n", b->bad, t->rev_us, t->good_us, b->good,
		t->ratio);
	if (t->ratio - 1 <= b->threshold) {
		fprintf(stderr, "bisect: %.7s is not slower than %.7s by more "
			"than %g%%: no slow commit to find\n", b->bad,
			b->good, 100 * b->threshold);
		return 1;
	}
	return 0;
}

/* How much slower the first slow commit is: from its step of the
 * bisect, else (bad itself, never run) from the precheck, else timed
 * once more. */
static void first_timing(struct timing *t, const struct bisect *b,
			 const char *log)
{
	double ratio = step_ratio(log, b->first);

	if (ratio > 0) {
		t->ratio = ratio;
		t->good_us = t->rev_us = 0;
	} else if (strcmp(b->first, b->bad) || t->ratio <= 0) {
		if (measure(t, b, b->first))
			t->ratio = 0;
	}
}

int cmd_bisect(int argc, char **argv)
{
	struct bisect b = { .candidates = STRBUF_INIT };
	struct strbuf log = STRBUF_INIT;
	struct timing t = { 0 };
	int rc;

	if ((rc = bisect_parse(argc, argv, &b)))
		return rc < 0 ? 0 : rc;
	if ((rc = check_state()) || (rc = check_range(&b)))
		goto cleanup;
	if (find_name(&b) < 0) {
		rc = 3;
		goto cleanup;
	}
	if ((rc = precheck(&b, &t)) || (rc = bisect(&b, &log)))
		goto cleanup;
	if (!b.first[0]) {
		fprintf(stderr, "bisect: commits that could not be tested "
			"leave several candidates:\n%s", b.candidates.buf);
		rc = 1;
		goto cleanup;
	}
	first_timing(&t, &b, log.buf);
	print_found(&b, &t);
cleanup:
	strbuf_release(&b.candidates);
	strbuf_release(&log);
	return rc;
}
