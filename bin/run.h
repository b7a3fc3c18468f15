/*
 * run.h: what `run` (bin/cmd-run.c) and its coordinator of workers
 * (bin/run-pool.c) share.
 *
 * `run` alone runs the loop in the work tree.  With --workers, --gpus or
 * --slurm it is the coordinator: it makes a worktree per worker
 * (judge/workers.h), starts `git-autokernel run --worker K ...` in each,
 * passes Ctrl-C on to them, and removes the worktrees when they are done.
 */
#ifndef BIN_RUN_H
#define BIN_RUN_H

#include <signal.h>

struct run_opts {
	const char *agent, *ops;
	int max, plateau;
	double budget_s;
	int agent_argc;
	char **agent_argv;
	/* --workers N, --gpus LIST|all, --slurm [--partition P] [--gres G] */
	int workers;
	const char *gpus;
	int slurm;
	const char *partition, *gres;
	/* hidden, from the coordinator to a worker */
	int worker;             /* this worker's number, 1-based */
	long long started;      /* the run's start (now_ns()) */
	int recover;            /* only recover the worktree, then exit */
};

/* Ctrl-C: 1 after the first (stop after the experiments in flight), 2
 * after the second or a SIGTERM (stop now; run_interrupted is set). */
extern volatile sig_atomic_t run_stops;
/* Catches SIGINT, SIGTERM and SIGHUP for run_stops; msg (or nothing, for
 * NULL) is printed at the first Ctrl-C. */
void run_catch_stops(const char *msg);

/* The coordinator: the exit status of `run` with workers.  argv is run's
 * own (argv[0] "run"), passed on to every worker; ops the op list. */
int run_pool(const struct run_opts *o, int argc, char **argv,
	     const char *ops);

/* The run lock and a clean work tree: 0, or 3 after an error. */
int run_begin(void);

/* The end of a run that run_begin() began: the lock released, what
 * stopped it said, `log --attempts` shown; the exit status from rc. */
int run_end(int rc);

#endif
