/*
 * git-autokernel.c: the command table and dispatch.  `git autokernel CMD`
 * runs this binary as git-autokernel CMD.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "bin/builtin.h"
#include "ops/dtype.h"
#include "lib/paths.h"
#include "lib/repo.h"
#include "lib/run.h"
#include "verify/verify.h"

/*
 * What a command needs before it runs, checked here once, as git.c's
 * table does: RUN_SETUP a repository (repo_need(), exit 3 outside one),
 * NEED_WORK_TREE one with a work tree, NEED_BRANCH an autokernel/<name>
 * branch checked out.  A command that can do without one sometimes
 * (verify and bench take a kernel directory anywhere, run takes --ops
 * off a branch, profile and e2e need a repository only for --start and
 * --record, bisect finds the experiment in <bad>'s tree) checks for
 * itself.  `CMD -h` is never refused.
 */
#define RUN_SETUP	(1 << 0)
#define NEED_WORK_TREE	(1 << 1)
#define NEED_BRANCH	(1 << 2)

struct cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	unsigned flags;
	const char *help;
};

static const struct cmd commands[] = {
	{ "init", cmd_init, RUN_SETUP,
	  "install the hooks, set defaults, measure the device" },
	{ "start", cmd_start, RUN_SETUP | NEED_WORK_TREE,
	  "start an experiment branch for an op" },
	{ "verify", cmd_verify, 0, "run the five verification stages" },
	{ "bench", cmd_bench, 0, "time a kernel, or A/B against a revision" },
	{ "run", cmd_run, RUN_SETUP | NEED_WORK_TREE,
	  "the experiment loop with an agent" },
	{ "log", cmd_log, RUN_SETUP | NEED_BRANCH,
	  "one row per experiment on the branch" },
	{ "report", cmd_report, RUN_SETUP | NEED_BRANCH,
	  "a pull-request body: tables and a plot" },
	{ "bisect", cmd_bisect, RUN_SETUP | NEED_WORK_TREE,
	  "find the commit that made a kernel slower" },
	{ "profile", cmd_profile, 0, "rank a model's GPU kernels by time" },
	{ "ops", cmd_ops, 0, "list the supported ops" },
	{ "export", cmd_export, RUN_SETUP,
	  "the kept kernels as a PyTorch package" },
	{ "e2e", cmd_e2e, 0, "a model's time and accuracy with the kernels" },
	{ "demo", cmd_demo, 0, "a short tuning session in a scratch repository" },
	{ "hook", cmd_hook, RUN_SETUP, "what the installed hooks call" },
	/* not listed: what run --slurm's jobs run */
	{ "judge-job", cmd_judge_job, RUN_SETUP, NULL },
};

int usage_with(const char *text, int help)
{
	fputs(text, help ? stdout : stderr);
	return help ? 0 : 2;
}

static void list_commands(FILE *f)
{
	fprintf(f, "usage: git autokernel <command> [<args>]\n\n");
	for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
		if (commands[i].help)
			fprintf(f, "   %-9s %s\n", commands[i].name,
				commands[i].help);
	fprintf(f, "\n'git autokernel <command> -h' shows a command's options;"
		" 'git autokernel --help' the manual.\n");
}

static int show_man(void)
{
	char page[8192];
	struct child c = CHILD_INIT;
	int rc;

	snprintf(page, sizeof(page), "%s/doc/git-autokernel.1", ak_datadir());
	if (access(page, R_OK))
		snprintf(page, sizeof(page), "%s/../share/man/man1/"
			 "git-autokernel.1", ak_datadir());
	strvec_pushl(&c.args, "man", access(page, R_OK) ? "git-autokernel" :
		     "-l", NULL);
	if (!access(page, R_OK))
		strvec_push(&c.args, page);
	c.same_group = 1;
	rc = run_child(&c);
	child_release(&c);
	if (rc) {
		list_commands(stdout);
		return 0;
	}
	return 0;
}

/* -h or --help among the options: the command prints its usage. */
static int asks_help(int argc, char **argv)
{
	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
			return 1;
	return 0;
}

/* 0 when what the command needs is there; -1 after an error. */
static int check_setup(const struct cmd *cmd)
{
	char *name;

	if (cmd->flags & (RUN_SETUP | NEED_WORK_TREE | NEED_BRANCH))
		repo_need();
	if ((cmd->flags & NEED_WORK_TREE) &&
	    git_repository_is_bare(repo_need()))
		return error("'git autokernel %s' needs a work tree",
			     cmd->name);
	if (cmd->flags & NEED_BRANCH) {
		name = repo_branch_name();
		if (!name)
			return error("not on an autokernel/* branch: 'git "
				     "autokernel start <op>' first, or check "
				     "one out");
		free(name);
	}
	return 0;
}

int run_builtin(int argc, char **argv)
{
	for (size_t i = 0; i < ARRAY_SIZE(commands); i++) {
		const struct cmd *cmd = &commands[i];

		if (strcmp(cmd->name, argv[0]))
			continue;
		if (!asks_help(argc, argv) && check_setup(cmd) < 0)
			return EXIT_ENV;
		optind = 1;
		return cmd->fn(argc, argv);
	}
	error("'%s' is not a git autokernel command; see 'git autokernel -h'",
	      argv[0]);
	return EXIT_USAGE;
}

int main(int argc, char **argv)
{
	const char *name;
	int rc;

	run_setup_signals();
	dtype_init();
	verify_set_threads(1);
	if (argc < 2) {
		list_commands(stderr);
		return 2;
	}
	name = argv[1];
	if (!strcmp(name, "--help") || !strcmp(name, "help"))
		return show_man();
	if (!strcmp(name, "-h")) {
		list_commands(stdout);
		return 0;
	}
	if (!strcmp(name, "--version") || !strcmp(name, "version")) {
		printf("git-autokernel %s (libgit2 %s)\n", AK_VERSION,
		       LIBGIT2_VERSION);
		return 0;
	}
	rc = run_builtin(argc - 1, argv + 1);
	repo_close();
	fflush(stdout);
	if (ferror(stdout))
		return 3;
	return rc;
}
