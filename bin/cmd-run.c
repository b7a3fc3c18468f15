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
#include <unistd.h>
#include "agent/agent.h"
#include "bin/builtin.h"
#include "lib/history.h"
#include "judge/judge.h"
#include "judge/loop.h"
#include "lib/cell.h"
#include "lib/paths.h"
#include "lib/records.h"
#include "lib/repo.h"
#include "lib/run.h"

static const char usage_run[] =
	"usage: git autokernel run [--agent tune|exec|llm] [--max-experiments N]\n"
	"                          [--budget DURATION] [--plateau N]\n"
	"                          [--ops NAME,NAME...] [-- CMD ARGS...]\n"
	"\n"
	"The experiment loop on the current autokernel/* branch (or on the\n"
	"branches of --ops, the one with the most Amdahl gain left first).\n"
	"Stops after N experiments, after DURATION (90s, 30m, 8h, 1h30m), after\n"
	"--plateau rejections in a row (autokernel.plateau, 20), or when the\n"
	"kernel reaches 95% of its floor.  Ctrl-C stops after the current\n"
	"experiment; a second Ctrl-C stops at once.  Either way the tree is\n"
	"left clean and the next run continues.\n";

struct run_opts {
	const char *agent, *ops;
	int max, plateau;
	double budget_s;
	int agent_argc;
	char **agent_argv;
};

struct run_state {
	const struct run_opts *o;
	struct agent *agent;
	long long t0;
	int done;               /* experiments made in this run */
	int tty;
	char last[160];
};

static volatile sig_atomic_t stops;

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
		stops = from_tty ? from_tty : 1;
	} else {
		stops = 2;
	}
	if (stops == 1 && !(from_git && from_tty)) {
		static const char msg[] = "\nautokernel: stopping after this "
			"experiment (Ctrl-C again to stop now)\n";

		if (write(2, msg, sizeof(msg) - 1) < 0)
			stops = 2;
	}
	if (stops < 2)
		return;
	run_interrupted = sig;
	run_signal_children(SIGTERM);
}

static void catch_stops(void)
{
	struct sigaction sa;

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

static int parse_run(int argc, char **argv, struct run_opts *o)
{
	static const struct option opts[] = {
		{ "agent", required_argument, NULL, 'a' },
		{ "max-experiments", required_argument, NULL, 'n' },
		{ "budget", required_argument, NULL, 'b' },
		{ "plateau", required_argument, NULL, 'p' },
		{ "ops", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int opt;

	o->plateau = config_int("autokernel.plateau", 20);
	while ((opt = getopt_long(argc, argv, "+hn:", opts, NULL)) != -1) {
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

/* The agent's candidate committed through the hooks (loop_commit()). */
static int commit_candidate(struct run_state *st, const char *name,
			    int number, const char *kernel,
			    const struct proposal *pr, const char *agent)
{
	struct watch w = { st, name, number };
	struct loop_commit lc = LOOP_COMMIT_INIT;
	int rc;

	lc.name = name;
	lc.kernel = kernel;
	lc.message = pr->hypothesis.buf;
	lc.tick = show_phase;
	lc.tick_data = &w;
	strvec_push(&lc.env, "AUTOKERNEL_RUN=1");
	strvec_pushf(&lc.env, "AUTOKERNEL_AGENT=%s", agent);
	if (pr->usage) {
		char *text = json_dumps(pr->usage, JSON_COMPACT);

		strvec_pushf(&lc.env, "AUTOKERNEL_USAGE=%s", text);
		free(text);
	}
	rc = loop_commit(&lc);
	loop_commit_release(&lc);
	return rc;
}

static json_t *best_note(const struct history *h)
{
	json_t *best = NULL;

	for (size_t i = 0; i < h->nr; i++)
		if (!h->e[i].attempt && h->e[i].note)
			best = h->e[i].note;
	return best;
}

static void progress(struct run_state *st, const char *name,
		     const struct history *h, int number, const char *outcome)
{
	json_t *best = best_note(h);
	double el = (now_ns() - st->t0) / 1e9, left = -1;
	char e[32], l[32] = "-";

	if (st->o->budget_s > 0)
		left = st->o->budget_s - el;
	else if (st->o->max && st->done)
		left = el / st->done * (st->o->max - st->done);
	fmt_secs(e, sizeof(e), el);
	if (left >= 0)
		fmt_secs(l, sizeof(l), left);
	if (st->tty)
		fprintf(stderr, "\r\033[K");
	fprintf(stderr, "[%s %d", name, number);
	if (st->o->max)
		fprintf(stderr, " | %d/%d", st->done, st->o->max);
	fprintf(stderr, " | %s, %s left] best %.2f us %.2fx %.0f%% of floor | %s",
		e, l, json_number_value(json_object_get(best, "time_us")),
		json_number_value(json_object_get(best, "speedup")),
		100 * json_number_value(json_object_get(best, "roofline")),
		outcome);
	if (!st->tty)
		fputc('\n', stderr);
	fflush(stderr);
}

enum step { STEP_NEXT, STEP_OP_DONE, STEP_STOP, STEP_FATAL };

static enum step experiment(struct run_state *st, const char *name,
			    int *rejected_in_row)
{
	struct history h = HISTORY_INIT;
	struct agent_context ctx;
	struct proposal pr = PROPOSAL_INIT;
	struct strbuf kabs = STRBUF_INIT, krel = STRBUF_INIT, prompt = STRBUF_INIT;
	struct strbuf before = STRBUF_INIT, bad = STRBUF_INIT, outcome = STRBUF_INIT;
	struct candidate c = CANDIDATE_INIT;
	enum step step = STEP_NEXT;
	json_t *note = NULL;
	int rc;

	if (history_load(&h, name, 1) < 0 || candidate_load(&c, "HEAD", name)) {
		step = STEP_FATAL;
		goto cleanup;
	}
	strbuf_addf(&krel, "%s/%s", name, c.p.kernel);
	strbuf_addf(&kabs, "%s%s", repo_workdir(), krel.buf);
	strbuf_addf(&prompt, "%s/prompt.md", repo_autokernel_dir());
	memset(&ctx, 0, sizeof(ctx));
	ctx.name = name;
	ctx.workdir = repo_workdir();
	ctx.kernel_path = kabs.buf;
	ctx.kernel_rel = krel.buf;
	ctx.prompt_path = prompt.buf;
	ctx.p = &c.p;
	ctx.h = &h;
	ctx.device = json_object_get(best_note(&h), "ceilings");
	ctx.experiment = (int)h.nr;
	ctx.timeout_ms = (int)(config_double("autokernel.agentTimeout", 1800) * 1000);
	strbuf_addch(&before, '\n');
	loop_untracked(&before);
	rc = st->agent->propose(st->agent, &ctx, &pr);
	if (run_interrupted) {
		loop_restore_tree(before.buf);
		step = STEP_STOP;
		goto cleanup;
	}
	if (rc == -1) {
		error("the %s agent stopped the run: %s", st->agent->name,
		      pr.failure.buf);
		loop_restore_tree(before.buf);
		step = STEP_FATAL;
		goto cleanup;
	}
	if (rc == 2) {
		strbuf_addf(&outcome, "agent done: %s", pr.failure.buf);
		step = STEP_OP_DONE;
		loop_restore_tree(before.buf);
		goto report;
	}
	loop_out_of_scope(&bad, krel.buf, before.buf);
	if (rc == 1 || bad.len) {
		const char *reason = bad.len ? "scope" : "agent";
		struct strbuf why = STRBUF_INIT;

		if (bad.len)
			strbuf_addf(&why, "the agent changed files other than "
				    "%s: %s", krel.buf, bad.buf);
		else
			strbuf_addbuf(&why, &pr.failure);
		/* Saved even when the kernel did not change: the history
		 * shows the failed reply, and the numbering moves on. */
		loop_save_unjudged(name, pr.hypothesis.len ? pr.hypothesis.buf :
			      "(no hypothesis)", reason, why.buf);
		loop_restore_tree(before.buf);
		strbuf_addf(&outcome, "#%d rejected (%s): %.100s", ctx.experiment,
			    reason, why.buf);
		(*rejected_in_row)++;
		strbuf_release(&why);
		goto report;
	}
	if (!loop_kernel_changed(krel.buf)) {
		strbuf_addf(&outcome, "#%d no change: %s", ctx.experiment,
			    pr.hypothesis.buf);
		(*rejected_in_row)++;
		goto report;
	}
	rc = commit_candidate(st, name, ctx.experiment, krel.buf, &pr,
			      st->agent->name);
	if (rc < 0) {
		loop_restore_tree(before.buf);
		if (run_interrupted) {
			step = STEP_STOP;
			goto cleanup;
		}
		error("the commit failed for a reason other than the verdict "
		      "(above); stopping");
		step = STEP_FATAL;
		goto cleanup;
	}
	loop_restore_tree(before.buf);
	history_release(&h);
	history_load(&h, name, 1);
	note = h.nr ? h.e[h.nr - 1].note : NULL;
	strbuf_addf(&outcome, "#%d %s", ctx.experiment, rc ? "rejected" : "kept");
	if (rc)
		strbuf_addf(&outcome, " (%s)", json_string_value(
			json_object_get(note, "reason")));
	strbuf_addf(&outcome, ": %s", pr.hypothesis.buf);
	if (!cell_enabled())
		strbuf_addstr(&outcome, " | unconfined (autokernel.sandbox)");
	*rejected_in_row = rc ? *rejected_in_row + 1 : 0;
	if (!rc && json_number_value(json_object_get(note, "roofline")) >= 0.95) {
		strbuf_addstr(&outcome, " | at 95% of the floor");
		step = STEP_OP_DONE;
	}
report:
	st->done++;
	progress(st, name, &h, ctx.experiment, outcome.buf);
cleanup:
	proposal_release(&pr);
	history_release(&h);
	candidate_release(&c);
	strbuf_release(&kabs);
	strbuf_release(&krel);
	strbuf_release(&prompt);
	strbuf_release(&before);
	strbuf_release(&bad);
	strbuf_release(&outcome);
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
	json_t *note = NULL;
	double share, roof = 0;

	strbuf_addf(&rev, "refs/heads/autokernel/%s", name);
	strbuf_addf(&key, "autokernel.%s.share", name);
	share = config_double(key.buf, 1.0);
	if (git_revparse_single(&obj, repo_need(), rev.buf) == 0) {
		note = note_read(git_object_id(obj));
		roof = json_number_value(json_object_get(note, "roofline"));
	}
	json_decref(note);
	git_object_free(obj);
	strbuf_release(&rev);
	strbuf_release(&key);
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
	va_list ap;

	if (st->tty)
		fputc('\n', stderr);
	fprintf(stderr, "autokernel: stopping: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* Runs experiments on one op until a stop rule; STEP_* of the last. */
static enum step run_op(struct run_state *st, const char *name)
{
	int in_row = 0;
	enum step s = STEP_NEXT;

	loop_repair_head();
	while (s == STEP_NEXT) {
		double el = (now_ns() - st->t0) / 1e9;

		if (stops || run_interrupted) {
			s = STEP_STOP;
			break;
		}
		if (st->o->max && st->done >= st->o->max) {
			stop_note(st, "%d experiments made", st->done);
			return STEP_STOP;
		}
		if (st->o->budget_s > 0 && el >= st->o->budget_s) {
			stop_note(st, "the budget of %.0f s is spent",
				  st->o->budget_s);
			return STEP_STOP;
		}
		if (in_row >= st->o->plateau) {
			stop_note(st, "%s: %d rejections in a row, a plateau",
				  name, in_row);
			return STEP_OP_DONE;
		}
		s = experiment(st, name, &in_row);
	}
	if (st->tty)
		fputc('\n', stderr);
	return s;
}

static int run_ops(struct run_state *st, struct op_entry *ops, int n)
{
	enum step s = STEP_OP_DONE;

	for (int i = 0; i < n && s == STEP_OP_DONE; i++) {
		if (loop_switch_to(ops[i].name) < 0)
			return 3;
		s = run_op(st, ops[i].name);
	}
	return s == STEP_FATAL ? 1 : 0;
}

static void final_log(void)
{
	char *argv[] = { "log", "--attempts", NULL };

	printf("\n");
	run_builtin(2, argv);
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
	if (lock_acquire("run") < 0) {
		rc = 3;
		goto cleanup;
	}
	if (!loop_tree_is_clean()) {
		error("the work tree has changes to tracked files: commit or "
		      "stash them first ('git stash')");
		rc = EXIT_ENV;
		lock_release();
		goto cleanup;
	}
	/* said once here, not by each experiment's hook: no Landlock, or
	 * the cell turned off (then every outcome says so too) */
	if (cell_enabled())
		cell_probe();
	catch_stops();
	st.t0 = now_ns();
	n = list_ops(&ops, o.ops ? o.ops : name);
	rc = run_ops(&st, ops, n);
	lock_release();
	if (run_interrupted || stops) {
		fprintf(stderr, "autokernel: stopped: the tree is clean; 'git "
			"autokernel run' continues where this one stopped\n");
		if (run_interrupted)
			rc = 128 + run_interrupted;
	}
	if (!run_interrupted && rc != 3)
		final_log();
cleanup:
	free(ops);
	free(name);
	free(agent_name);
	agent_free(st.agent);
	return rc;
}
