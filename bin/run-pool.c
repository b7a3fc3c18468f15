/*
 * run-pool.c: the coordinator of `run --workers`, `--gpus` and `--slurm`
 * (bin/run.h).  It makes a worktree per worker (judge/workers.h), starts
 * `git-autokernel run --worker K ...` in each, pinned to its device, and
 * waits: a first Ctrl-C is passed on (each worker stops after its
 * experiment in flight), a second stops them at once.  A worker that
 * dies is recovered (what it left is landed or saved) and started again;
 * the others never stop for it.  At the end every worktree is removed
 * and the main work tree brought to the branch's new tip.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "bin/run.h"
#include "judge/judge.h"
#include "judge/loop.h"
#include "judge/setup.h"
#include "judge/slurm.h"
#include "judge/workers.h"
#include "lib/paths.h"
#include "lib/records.h"
#include "lib/repo.h"
#include "lib/run.h"

#define MAX_RESTARTS 3

struct worker {
	int n;
	const char *device;     /* for *_VISIBLE_DEVICES, or NULL */
	struct child c;
	int running, status, restarts;
};

struct pool_run {
	const struct run_opts *o;
	int argc;
	char **argv;
	const char *ops;
	char backend[16];
	struct worker *w;
	int n;
	struct strvec devices;
	long long t0;
	/* the main work tree's branch, kept at its tip as workers land */
	char *main_ref;
	git_oid synced;
	int sync_failed, forwarded;
};

/* The first op of the list: the branch whose backend counts. */
static char *first_op(const char *ops)
{
	return xstrndup(ops, strcspn(ops, ","));
}

static int load_backend(struct pool_run *pr)
{
	struct candidate c = CANDIDATE_INIT;
	struct strbuf rev = STRBUF_INIT;
	char *name = first_op(pr->ops);
	int rc;

	strbuf_addf(&rev, "refs/heads/autokernel/%s", name);
	rc = candidate_load(&c, rev.buf, name);
	if (!rc)
		snprintf(pr->backend, sizeof(pr->backend), "%s", c.p.backend);
	candidate_release(&c);
	strbuf_release(&rev);
	free(name);
	return rc ? -1 : 0;
}

/* How many devices the backend's runner sees (its hello). */
static int count_devices(const char *backend)
{
	struct judge j = JUDGE_INIT;
	int n = 0;

	if (judge_start(&j, backend) == 0 && judge_ready(&j) == 0)
		n = (int)json_integer_value(json_object_get(j.r.hello,
							    "device_count"));
	judge_stop(&j);
	return n;
}

/* --gpus 0,1 names devices as the runtime numbers them, so within a
 * CUDA_VISIBLE_DEVICES already set, the i-th of its list. */
static void add_device(struct pool_run *pr, const char *id)
{
	const char *env = getenv(!strcmp(pr->backend, "hip") ?
				 "HIP_VISIBLE_DEVICES" :
				 "CUDA_VISIBLE_DEVICES");
	char *end;
	long i = strtol(id, &end, 10);

	while (env && *env && !*end && i >= 0) {
		size_t len = strcspn(env, ",");

		if (i-- == 0) {
			char *d = xstrndup(env, len);

			strvec_push(&pr->devices, d);
			free(d);
			return;
		}
		env += len + (env[len] == ',');
	}
	strvec_push(&pr->devices, id);
}

static int parse_gpus(struct pool_run *pr)
{
	const char *g = pr->o->gpus;
	char *copy, *s, *next;

	if (!g)
		return 0;
	if (!strcmp(pr->backend, "host"))
		return error("the host backend has no GPUs: use --workers N");
	if (!strcmp(g, "all")) {
		int n = count_devices(pr->backend);

		if (n < 1)
			return error("no %s device answered: --gpus all found "
				     "none", pr->backend);
		for (int i = 0; i < n; i++)
			strvec_pushf(&pr->devices, "%d", i);
		return 0;
	}
	copy = xstrdup(g);
	for (s = copy; s; s = next) {
		next = strchr(s, ',');
		if (next)
			*next++ = '\0';
		if (!*s || strchr(s, ' ')) {
			free(copy);
			return error("--gpus wants device numbers like "
				     "0,1,2 or all, not '%s'", g);
		}
		add_device(pr, s);
	}
	free(copy);
	return 0;
}

/*
 * A worker's environment: its device, and its share of the cores.  A
 * GPU judge uses every core for its inputs, references and the checks
 * of each timed call (OpenMP); N judges at once would each start that
 * many threads, and OpenMP's threads spin while they wait: on the H200's
 * 16 cores, four workers checked a benchmark's calls 20 times slower
 * than one, and the device waited for them.  So each judge here gets
 * cores/N threads (AUTOKERNEL_THREADS), which sleep while they wait
 * (OMP_WAIT_POLICY, not for the host backend, whose kernels are timed
 * with OpenMP's threads as they are).  A Slurm job has its node's cores.
 */
static void worker_env(struct pool_run *pr, struct child *c,
		       const char *device)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);

	if (device)
		strvec_pushf(&c->env, "%s=%s", !strcmp(pr->backend, "hip") ?
			     "HIP_VISIBLE_DEVICES" : "CUDA_VISIBLE_DEVICES",
			     device);
	if (pr->o->slurm)
		return;
	if (!getenv("AUTOKERNEL_THREADS"))
		strvec_pushf(&c->env, "AUTOKERNEL_THREADS=%ld",
			     cores / pr->n > 1 ? cores / pr->n : 1);
	if (strcmp(pr->backend, "host") && !getenv("OMP_WAIT_POLICY"))
		strvec_push(&c->env, "OMP_WAIT_POLICY=passive");
}

/* `git-autokernel run --worker N ...` with run's own arguments; the
 * hidden ones first, so that a `--` among run's ends nothing of ours. */
static void worker_args(struct pool_run *pr, struct child *c, int n,
			int recover)
{
	strvec_pushl(&c->args, ak_exe(), "run", NULL);
	strvec_pushf(&c->args, "--worker=%d", n);
	strvec_pushf(&c->args, "--started=%lld", pr->t0);
	strvec_pushf(&c->args, "--ops=%s", pr->ops);
	if (recover)
		strvec_push(&c->args, "--recover");
	for (int i = 1; i < pr->argc; i++) {
		const char *a = pr->argv[i];
		char abs[PATH_MAX];

		/* the agent's command named from here, run from the worktree */
		if (pr->o->agent_argc && a == pr->o->agent_argv[0] &&
		    *a != '/' && strchr(a, '/') && realpath(a, abs))
			a = abs;
		strvec_push(&c->args, a);
	}
}

/* workers/<n>.pid: which process is worker n, for whoever looks. */
static void write_pid(const struct worker *w)
{
	struct strbuf path = STRBUF_INIT, pid = STRBUF_INIT;

	strbuf_addf(&path, "%s/%d.pid", pool_dir(), w->n);
	strbuf_addf(&pid, "%d\n", (int)w->c.pid);
	write_file_atomic(path.buf, pid.buf, pid.len);
	strbuf_release(&path);
	strbuf_release(&pid);
}

static void remove_pid(const struct worker *w)
{
	struct strbuf path = STRBUF_INIT;

	strbuf_addf(&path, "%s/%d.pid", pool_dir(), w->n);
	unlink(path.buf);
	strbuf_release(&path);
}

static int spawn(struct pool_run *pr, struct worker *w)
{
	struct strbuf dir = STRBUF_INIT;
	int rc;

	child_release(&w->c);
	w->c = (struct child)CHILD_INIT;
	pool_worktree(&dir, w->n);
	worker_args(pr, &w->c, w->n, 0);
	worker_env(pr, &w->c, w->device);
	w->c.dir = dir.buf;
	w->c.no_stdin = 1;
	/* a worker has no limit of its own: every child it starts (agent,
	 * commit, job) has one, and the budget stops it */
	rc = start_child(&w->c);
	w->c.dir = NULL;
	w->running = rc == 0;
	if (!rc)
		write_pid(w);
	strbuf_release(&dir);
	return rc;
}

/* What a dead worker left in worktree n, landed or saved (pool_recover()
 * in a process of its own, in that worktree). */
static void recover(struct pool_run *pr, int n)
{
	struct child c = CHILD_INIT;
	struct strbuf dir = STRBUF_INIT;

	pool_worktree(&dir, n);
	worker_args(pr, &c, n, 1);
	c.dir = dir.buf;
	c.no_stdin = 1;
	c.timeout_ms = 30 * 60 * 1000;
	if (run_child(&c))
		warning("the recovery of worker %d's worktree failed", n);
	child_release(&c);
	strbuf_release(&dir);
}

/* Whether process pid is alive and works in dir (a worker's cwd is its
 * worktree): a pid file's number reused by another process is not. */
static int works_in(long pid, const char *dir)
{
	char link[64], cwd[PATH_MAX], *real = realpath(dir, NULL);
	ssize_t len;
	int ret;

	snprintf(link, sizeof(link), "/proc/%ld/cwd", pid);
	len = readlink(link, cwd, sizeof(cwd) - 1);
	if (len >= 0)
		cwd[len] = '\0';
	ret = len >= 0 && real && !strcmp(cwd, real);
	free(real);
	return ret;
}

/* A worker of the killed run may still be stopping (the coordinator's
 * death sent it SIGTERM, and it saves the candidate it was judging): its
 * worktree is recovered and removed once it has exited, not under it.
 * t0220 once lost a worktree's admin directory to that race. */
static int wait_left_worker(int n)
{
	struct strbuf path = STRBUF_INIT, pid = STRBUF_INIT, dir = STRBUF_INIT;
	long p;
	int ret = 0;

	strbuf_addf(&path, "%s/%d.pid", pool_dir(), n);
	pool_worktree(&dir, n);
	if (strbuf_read_file(&pid, path.buf) > 0 &&
	    (p = strtol(pid.buf, NULL, 10)) > 0 && works_in(p, dir.buf)) {
		fprintf(stderr, "autokernel: worker %d of the killed run (pid "
			"%ld) is still stopping: waiting for it\n", n, p);
		/* an experiment's judgement ends within its time limits */
		for (int i = 0; works_in(p, dir.buf); i++) {
			if (i == 6000) {
				ret = error("worker %d of the killed run (pid "
					    "%ld) has not stopped in 10 minutes: "
					    "stop it ('kill %ld') and run again",
					    n, p, p);
				goto out;
			}
			usleep(100000);
		}
	}
	unlink(path.buf);
out:
	strbuf_release(&path);
	strbuf_release(&pid);
	strbuf_release(&dir);
	return ret;
}

/* Worktrees of a run that was killed: their work recovered, removed. */
static int clear_left(struct pool_run *pr)
{
	int left[256], nr = pool_left(left, 256);

	for (int i = 0; i < nr; i++)
		if (wait_left_worker(left[i]) < 0)
			return -1;
	git_cmd(NULL, 1, "worktree", "prune", NULL);
	for (int i = 0; i < nr; i++) {
		warning("worker %d's worktree is left from a run that was "
			"killed: recovering it", left[i]);
		recover(pr, left[i]);
		pool_remove_worktree(left[i]);
	}
	pool_clear();
	return 0;
}

static void main_tree_start(struct pool_run *pr)
{
	char *b = repo_current_branch();

	if (b && starts_with(b, "autokernel/")) {
		struct strbuf ref = STRBUF_INIT;

		strbuf_addf(&ref, "refs/heads/%s", b);
		if (git_reference_name_to_id(&pr->synced, repo_need(),
					     ref.buf) == 0)
			pr->main_ref = strbuf_detach(&ref, NULL);
		strbuf_release(&ref);
	}
	free(b);
}

/* The main work tree to its branch's tip, which the workers move: as a
 * fast-forward (`git read-tree -m -u OLD NEW`), so nothing of the
 * user's is overwritten. */
static void main_tree_sync(struct pool_run *pr)
{
	git_oid tip;
	char from[GIT_OID_HEXSZ + 1], to[GIT_OID_HEXSZ + 1];

	if (!pr->main_ref || pr->sync_failed ||
	    git_reference_name_to_id(&tip, repo_need(), pr->main_ref) < 0 ||
	    git_oid_equal(&tip, &pr->synced))
		return;
	git_oid_tostr(from, sizeof(from), &pr->synced);
	git_oid_tostr(to, sizeof(to), &tip);
	if (git_cmd(NULL, 1, "read-tree", "-m", "-u", from, to, NULL)) {
		warning("the work tree could not follow %s from %.7s to %.7s: "
			"'git reset --keep %.7s' brings it there", pr->main_ref,
			from, to, to);
		pr->sync_failed = 1;
		return;
	}
	pr->synced = tip;
}

static int start_workers(struct pool_run *pr)
{
	struct strbuf dir = STRBUF_INIT, rev = STRBUF_INIT;
	char *name = first_op(pr->ops);
	int ret = 0;

	strbuf_addf(&rev, "refs/heads/autokernel/%s", name);
	pr->w = xcalloc(pr->n, sizeof(*pr->w));
	for (int i = 0; i < pr->n && !ret; i++) {
		struct worker *w = &pr->w[i];

		w->n = i + 1;
		w->c = (struct child)CHILD_INIT;
		if (pr->devices.nr)
			w->device = pr->devices.v[i % pr->devices.nr];
		strbuf_reset(&dir);
		if (pool_add_worktree(&dir, w->n, rev.buf) < 0 ||
		    spawn(pr, w) < 0)
			ret = -1;
	}
	free(name);
	strbuf_release(&dir);
	strbuf_release(&rev);
	return ret;
}

/* A worker's end: a crash (not a stop) is recovered and started again. */
static void worker_ended(struct pool_run *pr, struct worker *w, int status)
{
	char how[64];

	w->running = 0;
	w->status = status;
	if (status <= 128 || run_stops)
		return;
	child_describe(&w->c, status, how, sizeof(how));
	fprintf(stderr, "autokernel: worker %d %s; the other workers go on\n",
		w->n, how);
	recover(pr, w->n);
	if (w->restarts++ < MAX_RESTARTS && !run_stops && spawn(pr, w) == 0)
		fprintf(stderr, "autokernel: worker %d started again (its "
			"worktree recovered)\n", w->n);
}

static int running(const struct pool_run *pr)
{
	int n = 0;

	for (int i = 0; i < pr->n; i++)
		n += pr->w[i].running;
	return n;
}

/* Until every worker is done; Ctrl-C passed on to them. */
static void wait_workers(struct pool_run *pr)
{
	while (running(pr)) {
		if (run_stops && !pr->forwarded) {
			/* the second Ctrl-C reaches them from the handler */
			for (int i = 0; i < pr->n; i++)
				if (pr->w[i].running)
					kill(pr->w[i].c.pid, SIGINT);
			pr->forwarded = 1;
		}
		for (int i = 0; i < pr->n; i++) {
			int st;

			if (!pr->w[i].running)
				continue;
			st = child_poll(&pr->w[i].c);
			if (st != CHILD_RUNNING)
				worker_ended(pr, &pr->w[i], st);
		}
		main_tree_sync(pr);
		usleep(100000);
	}
}

/* Every worktree recovered where its worker did not end well, then
 * removed; the run's claims and state forgotten.  The exit status. */
static int finish(struct pool_run *pr)
{
	int rc = 0;

	for (int i = 0; i < pr->n; i++) {
		struct worker *w = &pr->w[i];

		if (w->status > 128 || w->status < 0)
			recover(pr, w->n);
		if (w->status == 1 || w->status < 0)
			rc = 1;
		if (pool_remove_worktree(w->n) < 0)
			rc = 1;
		remove_pid(w);
		child_release(&w->c);
	}
	main_tree_sync(pr);
	pool_clear();
	return rc;
}

static void summary(struct pool_run *pr, int experiments)
{
	double s = (now_ns() - pr->t0) / 1e9;

	fprintf(stderr, "autokernel: %d workers made %d experiments in %.0f s "
		"(%.0f an hour); their worktrees are removed\n", pr->n,
		experiments, s, s > 0 ? experiments * 3600 / s : 0);
}

static int check_pool(struct pool_run *pr)
{
	if (pr->o->slurm && slurm_check() < 0)
		return 3;
	if (load_backend(pr) < 0 || parse_gpus(pr) < 0)
		return 3;
	pr->n = pr->o->workers ? pr->o->workers :
		pr->devices.nr ? (int)pr->devices.nr : 1;
	/* this version's hooks, which judge in a detached worktree too */
	if (setup_repository(1) < 0)
		return 3;
	return run_begin();
}

int run_pool(const struct run_opts *o, int argc, char **argv,
	     const char *ops)
{
	struct pool_run pr = { .o = o, .argc = argc, .argv = argv, .ops = ops,
			       .devices = STRVEC_INIT };
	int rc, experiments;

	if ((rc = check_pool(&pr)))
		goto cleanup;
	pr.t0 = now_ns();
	if (clear_left(&pr) < 0) {
		rc = run_end(EXIT_ENV);
		goto cleanup;
	}
	main_tree_start(&pr);
	run_catch_stops("\nautokernel: stopping the workers after their "
			"experiments in flight (Ctrl-C again to stop now)\n");
	fprintf(stderr, "autokernel: %d worker%s on %s%s%s, in %s\n", pr.n,
		pr.n > 1 ? "s" : "", ops, o->slurm ? ", judged by Slurm jobs" :
		"", pr.devices.nr ? " (one GPU each, in turn)" : "",
		pool_dir());
	if (start_workers(&pr) < 0)
		rc = 3;
	wait_workers(&pr);
	experiments = pool_tickets();
	if (finish(&pr) && !rc)
		rc = 1;
	summary(&pr, experiments);
	rc = run_end(rc);
cleanup:
	free(pr.w);
	free(pr.main_ref);
	strvec_clear(&pr.devices);
	return rc;
}
