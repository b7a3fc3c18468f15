/*
 * slurm.h: a judgement as a Slurm job (`run --slurm`).  Nothing here
 * schedules: Slurm does.  The input is a commit of the repository (the
 * candidate's tree; its parent, the best it is judged against); the job
 * runs `git autokernel judge-job` on it in the worker's work tree, which
 * the compute node must see at the same path (the repository on a shared
 * filesystem), and writes the result JSON beside it; the submitting host
 * reads it and records it in git through the hooks (judge/loop.h).
 *
 *	struct slurm s = SLURM_INIT;
 *	s.partition = "gpu";
 *	s.gres = "gpu:1";
 *	rc = slurm_judge(&res, &s, "softmax", &commit, &env, &why);
 *	// 0: res is the judgement (json_decref it); 1: the job ended
 *	// without one (why: its state, the tail of its log), or the run
 *	// was interrupted and the job cancelled; -1: no job (error printed)
 *
 * The job's files are in $GIT_DIR/autokernel/job.* of the worker's work
 * tree: the script, its log, its id (for slurm_cancel_left() after a
 * crash) and the result.  sbatch, squeue and scancel run through lib/run.h
 * with a time limit each; the wait for the job is limited by timeout_s.
 */
#ifndef JUDGE_SLURM_H
#define JUDGE_SLURM_H

#include <git2.h>
#include <jansson.h>
#include "lib/run.h"

struct slurm {
	const char *partition;  /* sbatch --partition, or NULL */
	const char *gres;       /* sbatch --gres ("gpu:1"), or NULL */
	int timeout_s;          /* the job's --time and our wait for it */
};
#define SLURM_INIT { NULL, NULL, 4 * 3600 }

int slurm_judge(json_t **res, const struct slurm *s, const char *name,
		const git_oid *commit, const struct strvec *env,
		struct strbuf *why);

/* Cancels the job a worker that died left behind, if there is one. */
void slurm_cancel_left(void);

/* 0 when sbatch runs here, else -1 after an error. */
int slurm_check(void);

#endif
