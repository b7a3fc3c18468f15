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

struct cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *help;
};

static const struct cmd commands[] = {
	{ "init", cmd_init, "install the hooks, set defaults, measure the device" },
	{ "start", cmd_start, "start an experiment branch for an op" },
	{ "verify", cmd_verify, "run the five verification stages" },
	{ "bench", cmd_bench, "time a kernel, or A/B against a revision" },
	{ "run", cmd_run, "the experiment loop with an agent" },
	{ "log", cmd_log, "one row per experiment on the branch" },
	{ "report", cmd_report, "a pull-request body: tables and a plot" },
	{ "bisect", cmd_bisect, "find the commit that made a kernel slower" },
	{ "profile", cmd_profile, "rank a model's GPU kernels by time" },
	{ "ops", cmd_ops, "list the supported ops" },
	{ "export", cmd_export, "the kept kernels as a PyTorch package" },
	{ "e2e", cmd_e2e, "a model's time and accuracy with the kernels" },
	{ "demo", cmd_demo, "a short tuning session in a scratch repository" },
	{ "hook", cmd_hook, "what the installed hooks call" },
	/* not listed: what run --slurm's jobs run */
	{ "judge-job", cmd_judge_job, NULL },
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
	for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
		if (!strcmp(commands[i].name, name)) {
			rc = commands[i].fn(argc - 1, argv + 1);
			repo_close();
			fflush(stdout);
			if (ferror(stdout))
				return 3;
			return rc;
		}
	error("'%s' is not a git autokernel command; see 'git autokernel -h'",
	      name);
	return 2;
}
