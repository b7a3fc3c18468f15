/*
 * cmd-run.c: `run`, the experiment loop.
 *
 * Each experiment: the agent edits the kernel in the work tree, the loop
 * commits it with `git commit` so that the hooks judge it, and reads the
 * outcome back from git (a kept commit with its note, or a new attempt
 * ref).  Everything the loop knows comes from git, so a killed run loses
 * nothing and the next one continues the numbering.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>
#include "agent/agent.h"
#include "bin/builtin.h"
#include "bin/run.h"
#include "lib/history.h"
#include "judge/judge.h"
#include "judge/loop.h"
#include "judge/slurm.h"
#include "judge/workers.h"
#include "lib/cell.h"
#include "lib/paths.h"
#include "lib/records.h"
#include "lib/repo.h"
#include "lib/run.h"

static const char usage_run[] =
	"usage: git autokernel run [--agent tune|exec|llm] [--max-experiments N]\n"
	"                          [--budget DURATION] [--plateau N]\n"
	"                          [--ops NAME,NAME...]\n"
	"                          [--workers N] [--gpus LIST|all]\n"
	"                          [--slurm [--partition P] [--gres G]]\n"
	"                          [-- CMD ARGS...]\n"
	"\n"
	"The experiment loop on the current autokernel/* branch (or on the\n"
	"branches of --ops, the one with the most Amdahl gain left first).\n"
	"Stops after N experiments, after DURATION (90s, 30m, 8h, 1h30m), after\n"
	"--plateau rejections in a row (autokernel.plateau, 20), or when the\n"
	"kernel reaches 95% of its floor.  Ctrl-C stops after the current\n"
	"experiment; a second Ctrl-C stops at once.  Either way the tree is\n"
	"left clean and the next run continues.\n"
	"\n"
	"--workers N runs N experiments at once, each worker in a worktree of\n"
	"its own; --gpus pins a worker to each device (0,1,... or all); on\n"
	"one device the workers build and verify while one benchmarks.\n"
	"--slurm judges every candidate as a Slurm job (N jobs at once).\n";

struct run_state {
	const struct run_opts *o;
	struct agent *agent;
	struct pool *pool;      /* a worker's, or NULL when alone */
	long long t0;
	int done;               /* experiments made in this run */
	int tty;
	char last[160];
};

volatile sig_atomic_t run_stops;
static const char *stop_msg;

/*
 * The first Ctrl-C asks to stop after the experiment in flight, a second
 * one stops at once.  Through `git autokernel run` a Ctrl-C reaches git
 * and us together and git sends us its own copy: that copy is no second
 * Ctrl-C (run_signal_from_git()), whichever of the two comes first.
 */
static volatile sig_atomic_t from_git, from_tty;

static void on_stop(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	if (sig == SIGINT) {
		if (run_signal_from_git(si))
			from_git = 1;
		else
			from_tty++;
		run_stops = from_tty ? from_tty : 1;
	} else {
		run_stops = 2;
	}
	if (run_stops == 1 && !(from_git && from_tty) && stop_msg) {
		if (write(2, stop_msg, strlen(stop_msg)) < 0)
			run_stops = 2;
	}
	if (run_stops < 2)
		return;
	run_interrupted = sig;
	run_signal_children(SIGTERM);
}

void run_catch_stops(const char *msg)
{
	struct sigaction sa;

	stop_msg = msg;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_stop;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
}

static int parse_duration(const char *s, double *out)
{
	double total = 0;
	const char *p = s;

	if (!*s)
		return -1;
	while (*p) {
		char *end;
		double v = strtod(p, &end);

		if (end == p || v < 0)
			return -1;
		switch (*end) {
		case 'h': total += v * 3600; end++; break;
		case 'm': total += v * 60; end++; break;
		case 's': total += v; end++; break;
		case '\0': total += v; break;
		default: return -1;
		}
		p = end;
	}
	/* a year is longer than anyone means; 1e99h is a typo */
	if (!isfinite(total) || total > 366 * 86400.0)
		return -1;
	*out = total;
	return 0;
}

/* A count of 1 or more, the whole of s. */
static int parse_count(const char *s, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (end == s || *end || errno || v < 1 || v > 1000000000)
		return -1;
	*out = (int)v;
	return 0;
}

/* The options of run --workers and of a worker; 0, or 2 after an error. */
static int parse_pool_opt(int opt, const char *arg, struct run_opts *o)
{
	switch (opt) {
	case 'w':
		if (parse_count(arg, &o->workers) < 0 || o->workers > 200)
			return error("--workers wants a number of workers, "
				     "1 to 200, not '%s'", arg) ? 2 : 2;
		break;
	case 'g': o->gpus = arg; break;
	case 's': o->slurm = 1; break;
	case 'P': o->partition = arg; o->slurm = 1; break;
	case 'G': o->gres = arg; o->slurm = 1; break;
	case 'W':
		if (parse_count(arg, &o->worker) < 0)
			return error("bad worker number '%s'", arg) ? 2 : 2;
		break;
	case 'T': o->started = strtoll(arg, NULL, 10); break;
	case 'R': o->recover = 1; break;
	}
	return 0;
}

static int parse_run(int argc, char **argv, struct run_opts *o)
{
	static const struct option opts[] = {
		{ "agent", required_argument, NULL, 'a' },
		{ "max-experiments", required_argument, NULL, 'n' },
		{ "budget", required_argument, NULL, 'b' },
		{ "plateau", required_argument, NULL, 'p' },
		{ "ops", required_argument, NULL, 'o' },
		{ "workers", required_argument, NULL, 'w' },
		{ "gpus", required_argument, NULL, 'g' },
		{ "slurm", no_argument, NULL, 's' },
		{ "partition", required_argument, NULL, 'P' },
		{ "gres", required_argument, NULL, 'G' },
		/* from the coordinator to its workers */
		{ "worker", required_argument, NULL, 'W' },
		{ "started", required_argument, NULL, 'T' },
		{ "recover", no_argument, NULL, 'R' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int opt;

	o->plateau = config_int("autokernel.plateau", 20);
	while ((opt = getopt_long(argc, argv, "+hn:", opts, NULL)) != -1) {
		if (opt > 0 && strchr("wgsPGWTR", opt)) {
			if (parse_pool_opt(opt, optarg, o))
				return 2;
			continue;
		}
		switch (opt) {
		case 'a': o->agent = optarg; break;
		case 'n':
			if (parse_count(optarg, &o->max) < 0) {
				error("--max-experiments wants a number of "
				      "experiments, 1 or more, not '%s'", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'p':
			if (parse_count(optarg, &o->plateau) < 0) {
				error("--plateau wants a number of rejections, "
				      "1 or more, not '%s'", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'o': o->ops = optarg; break;
		case 'b':
			if (parse_duration(optarg, &o->budget_s) < 0) {
				error("bad duration '%s' (e.g. 90s, 30m, 8h, "
				      "1h30m; at most a year)", optarg);
				return EXIT_USAGE;
			}
			break;
		default:
			return usage_with(usage_run, opt == 'h') ? 2 : -1;
		}
	}
	if (o->max < 0 || o->plateau < 1)
		return usage_with(usage_run, 0);
	o->agent_argc = argc - optind;
	o->agent_argv = argv + optind;
	return 0;
}

static void fmt_secs(char *buf, size_t n, double s)
{
	if (s >= 3600)
		snprintf(buf, n, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
	else if (s >= 60)
		snprintf(buf, n, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
	else
		snprintf(buf, n, "%.0fs", s);
}

/* What the progress line shows while the hooks judge an experiment. */
struct watch {
	struct run_state *st;
	const char *name;
	int number;
};

/* On a terminal: the experiment's phase in place of the progress line. */
static void show_phase(const char *phase, void *data)
{
	struct watch *w = data;
	char e[32];

	if (!w->st->tty)
		return;
	fmt_secs(e, sizeof(e), (now_ns() - w->st->t0) / 1e9);
	fprintf(stderr, "\r\033[K[%s %d | %s] judging: %s", w->name, w->number,
		e, phase);
	fflush(stderr);
}

/* The loop_commit() of the agent's candidate (judge/loop.h). */
static void candidate_commit(struct loop_commit *lc, struct watch *w,
			     const char *kernel, const struct proposal *pr,
			     const char *agent)
{
	lc->name = w->name;
	lc->kernel = kernel;
	lc->message = pr->hypothesis.buf;
	lc->tick = show_phase;
	lc->tick_data = w;
	lc->slurm = w->st->pool ? w->st->pool->slurm : NULL;
	strvec_push(&lc->env, "AUTOKERNEL_RUN=1");
	strvec_pushf(&lc->env, "AUTOKERNEL_AGENT=%s", agent);
	if (pr->usage) {
		char *text = json_dumps(pr->usage, JSON_COMPACT);

		strvec_pushf(&lc->env, "AUTOKERNEL_USAGE=%s", text);
		free(text);
	}
}

/* The progress line, written at once: workers share the terminal.  Its
 * best is the report's, history_best(). */
static void progress(struct run_state *st, const char *name,
		     const struct history *h, int number, const char *outcome)
{
	static const struct result none = RESULT_INIT;
	const struct experiment *fastest = history_best(h);
	const struct result *best = fastest ? &fastest->result : &none;
	double el = (now_ns() - st->t0) / 1e9, left = -1;
	struct strbuf line = STRBUF_INIT;
	char e[32], l[32] = "-";

	if (st->o->budget_s > 0)
		left = st->o->budget_s - el;
	else if (st->o->max && st->done && !st->pool)
		left = el / st->done * (st->o->max - st->done);
	fmt_secs(e, sizeof(e), el);
	if (left >= 0)
		fmt_secs(l, sizeof(l), left);
	if (st->tty)
		strbuf_addstr(&line, "\r\033[K");
	strbuf_addch(&line, '[');
	if (st->pool)
		strbuf_addf(&line, "w%d ", st->pool->id);
	strbuf_addf(&line, "%s %d", name, number);
	if (st->o->max && !st->pool)
		strbuf_addf(&line, " | %d/%d", st->done, st->o->max);
	strbuf_addf(&line, " | %s, %s left] best %.2f us %.2fx %.0f%% of floor "
		    "| %s%s", e, l, best->time_us, best->speedup,
		    100 * best->roofline, outcome, st->tty ? "" : "\n");
	fputs(line.buf, stderr);
	fflush(stderr);
	strbuf_release(&line);
}

enum step { STEP_NEXT, STEP_OP_DONE, STEP_STOP, STEP_FATAL };

/* What one experiment needs besides the run: its context and outcome. */
struct trial {
	struct agent_context ctx;
	struct proposal pr;
	struct strbuf krel, before, outcome;
	git_oid head;                   /* HEAD when it began */
	int rejected;                   /* 1 rejected, 0 kept, -1 neither */
	int at_floor;
};

/* A hard stop while the hooks judged: the candidate is saved as an
 * unjudged attempt, unless its commit went through. */
static void save_stopped(struct trial *t)
{
	git_oid head;

	if (repo_head(&head) || !git_oid_equal(&head, &t->head) ||
	    !loop_kernel_changed(t->krel.buf))
		return;
	if (loop_save_unjudged(t->ctx.name, t->pr.hypothesis.buf,
			       "interrupted", "the run was stopped before the "
			       "judgement finished") == 0)
		fprintf(stderr, "\nautokernel: the candidate in flight is "
			"saved as an attempt\n");
}

/* Another worker has this very kernel: 1, and nothing to judge. */
static int claimed_elsewhere(struct run_state *st, struct trial *t)
{
	struct strbuf key = STRBUF_INIT;
	git_oid id;
	int taken = 0;

	if (!st->pool || git_odb_hashfile(&id, t->ctx.kernel_path,
					  GIT_OBJECT_BLOB) < 0)
		return 0;
	strbuf_addf(&key, "blob %s", git_oid_tostr_s(&id));
	taken = pool_claim(st->pool, key.buf) == 1;
	strbuf_release(&key);
	return taken;
}

/* The outcome of a judged candidate from its result.  A kept one at
 * autokernel.stopAtFloor of the floor (0.95; 0: never) ends its op. */
static void judged(struct trial *t, int rc, json_t *note)
{
	double at_floor = config_double("autokernel.stopAtFloor", 0.95);
	struct result res;

	result_from_note(&res, note);
	t->rejected = rc != 0;
	strbuf_addf(&t->outcome, "#%d %s", t->ctx.experiment, rc ? "rejected" :
		    "kept");
	if (rc)
		strbuf_addf(&t->outcome, " (%s)", res.reason);
	strbuf_addf(&t->outcome, ": %s", t->pr.hypothesis.buf);
	if (!cell_enabled())
		strbuf_addstr(&t->outcome, " | unconfined (autokernel.sandbox)");
	if (!rc && at_floor > 0 && res.roofline >= at_floor) {
		strbuf_addf(&t->outcome, " | at %.0f%% of the floor",
			    100 * at_floor);
		t->at_floor = 1;
	}
	result_release(&res);
}

/* The candidate committed through the hooks and, for a worker, landed on
 * the branch (pool_keep()). */
static enum step judge_trial(struct run_state *st, struct trial *t)
{
	struct watch w = { st, t->ctx.name, t->ctx.experiment };
	struct loop_commit lc = LOOP_COMMIT_INIT;
	enum step step = STEP_NEXT;
	int rc;

	candidate_commit(&lc, &w, t->krel.buf, &t->pr, st->agent->name);
	rc = loop_commit(&lc);
	if (rc == 0 && st->pool) {
		rc = pool_keep(&lc);
		if (rc == 2) {
			strbuf_addf(&t->outcome, "#%d superseded: the branch "
				    "has this kernel now", t->ctx.experiment);
			goto cleanup;
		}
	}
	if (rc < 0 && run_interrupted) {
		save_stopped(t);
		step = STEP_STOP;
	} else if (rc < 0) {
		error("the commit failed for a reason other than the verdict "
		      "(above); stopping");
		step = STEP_FATAL;
	} else {
		judged(t, rc, lc.result);
	}
cleanup:
	loop_restore_tree(t->before.buf);
	loop_commit_release(&lc);
	return step;
}

/* After the agent: its failure, an edit out of scope, no change, or a
 * candidate to judge. */
static enum step after_proposal(struct run_state *st, struct trial *t,
				int rc)
{
	struct strbuf bad = STRBUF_INIT, why = STRBUF_INIT;
	const char *krel = t->krel.buf;
	enum step step = STEP_NEXT;

	loop_out_of_scope(&bad, krel, t->before.buf);
	if (rc == 1 || bad.len) {
		const char *reason = bad.len ? "scope" : "agent";

		if (bad.len)
			strbuf_addf(&why, "the agent changed files other than "
				    "%s: %s", krel, bad.buf);
		else
			strbuf_addbuf(&why, &t->pr.failure);
		/* Saved even when the kernel did not change: the history
		 * shows the failed reply, and the numbering moves on. */
		loop_save_unjudged(t->ctx.name, t->pr.hypothesis.len ?
				   t->pr.hypothesis.buf : "(no hypothesis)",
				   reason, why.buf);
		loop_restore_tree(t->before.buf);
		strbuf_addf(&t->outcome, "#%d rejected (%s): %.100s",
			    t->ctx.experiment, reason, why.buf);
		t->rejected = 1;
	} else if (!loop_kernel_changed(krel)) {
		strbuf_addf(&t->outcome, "#%d no change: %s", t->ctx.experiment,
			    t->pr.hypothesis.buf);
		t->rejected = 1;
	} else if (claimed_elsewhere(st, t)) {
		strbuf_addf(&t->outcome, "#%d skipped: another worker has this "
			    "kernel", t->ctx.experiment);
		loop_restore_tree(t->before.buf);
	} else {
		step = judge_trial(st, t);
	}
	strbuf_release(&bad);
	strbuf_release(&why);
	return step;
}

static void trial_context(struct trial *t, struct run_state *st,
			  const char *name, struct candidate *c,
			  const struct history *h, struct strbuf *kabs,
			  struct strbuf *prompt)
{
	struct agent_context *ctx = &t->ctx;
	const struct experiment *current;

	strbuf_addf(&t->krel, "%s/%s", name, c->p.kernel);
	strbuf_addf(kabs, "%s%s", repo_workdir(), t->krel.buf);
	strbuf_addf(prompt, "%s/prompt.md", repo_autokernel_dir());
	memset(ctx, 0, sizeof(*ctx));
	ctx->name = name;
	ctx->workdir = repo_workdir();
	ctx->kernel_path = kabs->buf;
	ctx->kernel_rel = t->krel.buf;
	ctx->prompt_path = prompt->buf;
	ctx->p = &c->p;
	ctx->h = h;
	/* the device of the commit the agent starts from */
	current = history_current(h);
	ctx->device = current ? current->result.ceilings : NULL;
	ctx->experiment = (int)h->nr;
	ctx->timeout_ms = (int)(config_double("autokernel.agentTimeout", 1800) *
				1000);
	if (st->pool) {
		ctx->claim = pool_claim;
		ctx->claim_data = st->pool;
	}
	strbuf_addch(&t->before, '\n');
	loop_untracked(&t->before);
	repo_head(&t->head);
}

static enum step experiment(struct run_state *st, const char *name,
			    int *rejected_in_row)
{
	struct history h = HISTORY_INIT;
	struct trial t = { .pr = PROPOSAL_INIT, .krel = STRBUF_INIT,
			   .before = STRBUF_INIT, .outcome = STRBUF_INIT,
			   .rejected = -1 };
	struct strbuf kabs = STRBUF_INIT, prompt = STRBUF_INIT;
	struct candidate c = CANDIDATE_INIT;
	enum step step = STEP_NEXT;
	int rc;

	if (history_load(&h, name, 1) < 0 || candidate_load(&c, "HEAD", name)) {
		step = STEP_FATAL;
		goto cleanup;
	}
	trial_context(&t, st, name, &c, &h, &kabs, &prompt);
	rc = st->agent->propose(st->agent, &t.ctx, &t.pr);
	if (run_interrupted) {
		loop_restore_tree(t.before.buf);
		step = STEP_STOP;
		goto cleanup;
	}
	if (rc == -1) {
		error("the %s agent stopped the run: %s", st->agent->name,
		      t.pr.failure.buf);
		loop_restore_tree(t.before.buf);
		step = STEP_FATAL;
		goto cleanup;
	}
	if (rc == 2) {
		strbuf_addf(&t.outcome, "agent done: %s", t.pr.failure.buf);
		loop_restore_tree(t.before.buf);
		step = STEP_OP_DONE;
	} else if ((step = after_proposal(st, &t, rc)) != STEP_NEXT) {
		goto cleanup;
	}
	if (t.rejected >= 0)
		*rejected_in_row = t.rejected ? *rejected_in_row + 1 : 0;
	if (t.at_floor)
		step = STEP_OP_DONE;
	if (st->pool)
		pool_done(st->pool, name, t.rejected, step == STEP_OP_DONE);
	history_release(&h);
	history_load(&h, name, 1);
	st->done++;
	progress(st, name, &h, t.ctx.experiment, t.outcome.buf);
cleanup:
	proposal_release(&t.pr);
	history_release(&h);
	candidate_release(&c);
	strbuf_release(&kabs);
	strbuf_release(&prompt);
	strbuf_release(&t.krel);
	strbuf_release(&t.before);
	strbuf_release(&t.outcome);
	return step;
}

/* ---- the ops, in order of the gain left ---- */

struct op_entry {
	char name[256];
	double gain;            /* share of the model x (1 - roofline) */
};

static double op_gain(const char *name)
{
	struct strbuf rev = STRBUF_INIT, key = STRBUF_INIT;
	git_object *obj = NULL;
	struct result res = RESULT_INIT;
	double share, roof;

	strbuf_addf(&rev, "refs/heads/autokernel/%s", name);
	strbuf_addf(&key, "autokernel.%s.share", name);
	share = config_double(key.buf, 1.0);
	if (git_revparse_single(&obj, repo_need(), rev.buf) == 0) {
		json_t *note = note_read(git_object_id(obj));

		result_from_note(&res, note);
		json_decref(note);
	}
	git_object_free(obj);
	strbuf_release(&rev);
	strbuf_release(&key);
	roof = res.roofline;
	result_release(&res);
	return share * (1 - (roof < 1 ? roof : 1));
}

static int cmp_gain(const void *a, const void *b)
{
	double x = ((const struct op_entry *)a)->gain;
	double y = ((const struct op_entry *)b)->gain;

	return x < y ? 1 : x > y ? -1 : 0;
}

static int list_ops(struct op_entry **out, const char *list)
{
	struct op_entry *e = NULL;
	size_t nr = 0, alloc = 0;
	char *copy = xstrdup(list), *s = copy;

	while (s && *s) {
		char *comma = strchr(s, ',');

		if (comma)
			*comma = '\0';
		ALLOC_GROW(e, nr + 1, alloc);
		snprintf(e[nr].name, sizeof(e[nr].name), "%s", s);
		e[nr].gain = op_gain(s);
		nr++;
		s = comma ? comma + 1 : NULL;
	}
	free(copy);
	qsort(e, nr, sizeof(*e), cmp_gain);
	*out = e;
	return (int)nr;
}

static void stop_note(struct run_state *st, const char *fmt, ...)
	AK_PRINTF(2, 3);
static void stop_note(struct run_state *st, const char *fmt, ...)
{
	struct strbuf line = STRBUF_INIT;
	va_list ap;

	if (st->tty)
		strbuf_addch(&line, '\n');
	strbuf_addstr(&line, "autokernel: ");
	if (st->pool)
		strbuf_addf(&line, "w%d: ", st->pool->id);
	strbuf_addstr(&line, "stopping: ");
	va_start(ap, fmt);
	strbuf_vaddf(&line, fmt, ap);
	va_end(ap);
	strbuf_addch(&line, '\n');
	fputs(line.buf, stderr);
	strbuf_release(&line);
}

/* A worker's stop rules, shared by all workers (judge/workers.h); then
 * its worktree at the branch's tip.  STEP_NEXT to go on. */
static enum step pool_step(struct run_state *st, const char *name)
{
	int ticket;

	st->pool->op = name;
	switch (pool_next(st->pool, name, &ticket)) {
	case POOL_MAX:
		stop_note(st, "%d experiments made", st->o->max);
		return STEP_STOP;
	case POOL_PLATEAU:
		stop_note(st, "%s: %d rejections in a row, a plateau", name,
			  st->o->plateau);
		return STEP_OP_DONE;
	case POOL_OP_DONE:
		return STEP_OP_DONE;
	case POOL_GO:
		break;
	}
	return pool_sync(name) < 0 ? STEP_FATAL : STEP_NEXT;
}

/* The stop rules before an experiment; STEP_NEXT to make it. */
static enum step stop_rules(struct run_state *st, const char *name,
			    int in_row)
{
	double el = (now_ns() - st->t0) / 1e9;

	if (run_stops || run_interrupted)
		return STEP_STOP;
	if (st->o->budget_s > 0 && el >= st->o->budget_s) {
		stop_note(st, "the budget of %.0f s is spent", st->o->budget_s);
		return STEP_STOP;
	}
	if (st->pool)
		return pool_step(st, name);
	if (st->o->max && st->done >= st->o->max) {
		stop_note(st, "%d experiments made", st->done);
		return STEP_STOP;
	}
	if (in_row >= st->o->plateau) {
		stop_note(st, "%s: %d rejections in a row, a plateau", name,
			  in_row);
		return STEP_OP_DONE;
	}
	return STEP_NEXT;
}

/* Runs experiments on one op until a stop rule; STEP_* of the last. */
static enum step run_op(struct run_state *st, const char *name)
{
	int in_row = 0;
	enum step s = STEP_NEXT;

	if (!st->pool)
		loop_repair_head();
	while (s == STEP_NEXT) {
		s = stop_rules(st, name, in_row);
		if (s == STEP_NEXT)
			s = experiment(st, name, &in_row);
	}
	if (st->tty)
		fputc('\n', stderr);
	return s;
}

/* The ops in turn; a worker starts at its own (the k-th, round). */
static int run_ops(struct run_state *st, struct op_entry *ops, int n)
{
	enum step s = STEP_OP_DONE;
	int first = st->pool ? (st->pool->id - 1) % n : 0;

	for (int k = 0; k < n && s == STEP_OP_DONE; k++) {
		const char *name = ops[(first + k) % n].name;

		if (!st->pool && loop_switch_to(name) < 0)
			return 3;
		s = run_op(st, name);
	}
	return s == STEP_FATAL ? 1 : 0;
}

int run_end(int rc)
{
	char *argv[] = { "log", "--attempts", NULL };

	lock_release();
	if (run_interrupted || run_stops) {
		fprintf(stderr, "autokernel: stopped: the tree is clean; 'git "
			"autokernel run' continues where this one stopped\n");
		if (run_interrupted)
			rc = 128 + run_interrupted;
	}
	if (!run_interrupted && rc != EXIT_ENV) {
		printf("\n");
		run_builtin(2, argv);
	}
	return rc;
}

/* A worker of `run --workers`, in its worktree: first what a worker
 * before it left there, then the loop (stopped by the coordinator's
 * signals and the pool's shared rules). */
static int run_worker(struct run_state *st, struct op_entry *ops, int n)
{
	const struct run_opts *o = st->o;
	struct pool p = POOL_INIT;
	struct slurm s = SLURM_INIT;

	p.id = o->worker;
	p.max = o->max;
	p.plateau = o->plateau;
	if (o->slurm) {
		s.partition = o->partition;
		s.gres = o->gres;
		s.timeout_s = (int)config_double("autokernel.slurm.timeout",
						 4 * 3600);
		p.slurm = &s;
	}
	st->pool = &p;
	st->tty = 0;
	run_catch_stops(NULL);  /* the coordinator says it, once */
	/* a coordinator that dies, however, stops its workers at once */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (pool_recover(&p) < 0)
		return 1;
	if (o->recover)
		return 0;
	st->t0 = o->started ? o->started : now_ns();
	return run_ops(st, ops, n);
}

int run_begin(void)
{
	if (lock_acquire("run") < 0)
		return EXIT_ENV;
	if (!loop_tree_is_clean()) {
		lock_release();
		error("the work tree has changes to tracked files: commit or "
		      "stash them first ('git stash')");
		return EXIT_ENV;
	}
	/* said once here, not by each experiment's hook: no Landlock, or
	 * the cell turned off (then every outcome says so too) */
	if (cell_enabled())
		cell_probe();
	return 0;
}

/* The loop in this work tree, alone. */
static int run_alone(struct run_state *st, struct op_entry *ops, int n)
{
	int rc;

	if ((rc = run_begin()))
		return rc;
	run_catch_stops("\nautokernel: stopping after this experiment "
			"(Ctrl-C again to stop now)\n");
	st->t0 = now_ns();
	return run_end(run_ops(st, ops, n));
}

int cmd_run(int argc, char **argv)
{
	struct run_opts o = { 0 };
	struct run_state st = { 0 };
	struct op_entry *ops = NULL;
	char *name = NULL, *agent_name = NULL;
	int rc, n;

	if ((rc = parse_run(argc, argv, &o)))
		return rc < 0 ? 0 : rc;
	agent_name = o.agent ? xstrdup(o.agent) :
		config_string("autokernel.agent", "tune");
	st.o = &o;
	st.tty = isatty(2);
	if (!(st.agent = agent_new(agent_name))) {
		error("unknown agent '%s' (tune, exec, llm)", agent_name);
		rc = EXIT_USAGE;
		goto cleanup;
	}
	if (st.agent->init(st.agent, o.agent_argc, o.agent_argv) < 0) {
		rc = 2;
		goto cleanup;
	}
	name = repo_branch_name();
	if (!o.ops && !name) {
		error("not on an autokernel/* branch: 'git autokernel start "
		      "<op>' first, or name branches with --ops");
		rc = EXIT_ENV;
		goto cleanup;
	}
	if (!o.worker && (o.workers || o.gpus || o.slurm)) {
		rc = run_pool(&o, argc, argv, o.ops ? o.ops : name);
		goto cleanup;
	}
	n = list_ops(&ops, o.ops ? o.ops : name);
	rc = o.worker ? run_worker(&st, ops, n) : run_alone(&st, ops, n);
cleanup:
	free(ops);
	free(name);
	free(agent_name);
	agent_free(st.agent);
	return rc;
}
