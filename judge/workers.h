/*
 * workers.h: `run --workers` in git.  Each worker is a worktree of the
 * repository, detached at the branch's tip, in
 * $GIT_COMMON_DIR/autokernel/workers/<n>; its $GIT_DIR/autokernel/experiment
 * names the experiment, so the same hooks judge what it commits there.
 *
 * A kept candidate is a commit on the worker's detached HEAD; it lands on
 * autokernel/<name> only through pool_keep(), one worker at a time (a
 * lock, then a compare-and-swap of the branch), and only if the branch's
 * tip is still the commit it was judged against.  If the tip moved, the
 * worker resets to the new tip, applies the kernel again and commits it
 * again: the hooks judge it against the new best, and it is kept or it is
 * an attempt like any other.  Rejections are attempts as they always are.
 *
 * The workers share the rest in the same directory: claims (a candidate
 * one worker has is no other's: agent_context.claim) and a state (the
 * tickets of --max-experiments; per op, the rejections in a row and
 * whether it is done).  All of it is the run's: pool_clear() empties it.
 *
 *	// the coordinator
 *	pool_clear();
 *	pool_add_worktree(&path, 1, "autokernel/softmax");
 *	... a worker runs in path ...
 *	pool_remove_worktree(1);
 *
 *	// a worker, in its worktree
 *	struct pool p = POOL_INIT;
 *	pool_recover(&p);                       // what a dead one left
 *	while (pool_next(&p, "softmax", &n) == POOL_GO) {
 *		pool_sync("softmax");           // to the branch's tip
 *		... propose, loop_commit() ...
 *		rc = pool_keep(&lc);            // if kept: land it
 *		pool_done(&p, "softmax", kept, at_floor);
 *	}
 */
#ifndef JUDGE_WORKERS_H
#define JUDGE_WORKERS_H

#include <git2.h>
#include "judge/loop.h"
#include "lib/strbuf.h"

struct pool {
	int id;                 /* this worker, 1-based */
	int max;                /* experiments in all workers, 0: no limit */
	int plateau;            /* rejections in a row that end an op */
	const struct slurm *slurm;      /* judge by Slurm jobs, or NULL */
	const char *op;                 /* the experiment being worked on */
};
#define POOL_INIT { 0, 0, 20, NULL, NULL }

/* $GIT_COMMON_DIR/autokernel/workers, created on demand. */
const char *pool_dir(void);
void pool_worktree(struct strbuf *path, int n);
/* The worktree of worker n, detached at rev: 0, or error(). */
int pool_add_worktree(struct strbuf *path, int n, const char *rev);
/* `git worktree remove --force` and prune; 0 or error(). */
int pool_remove_worktree(int n);
/* The numbers of the worktrees a run left, into out (n at most);
 * their count. */
int pool_left(int *out, int n);
/* Forgets the claims and the state of a run. */
void pool_clear(void);
/* The experiments the run's workers began (their tickets). */
int pool_tickets(void);

enum pool_go { POOL_GO, POOL_MAX, POOL_PLATEAU, POOL_OP_DONE };
/* Before an experiment on name: its ticket (1-based, across workers)
 * into *ticket, or why to stop. */
enum pool_go pool_next(struct pool *p, const char *name, int *ticket);
/* After one: a rejection (rejected 1) adds one to the op's rejections in
 * a row, a kept candidate (0) ends them, -1 leaves them; op_done ends the
 * op for every worker. */
void pool_done(struct pool *p, const char *name, int rejected, int op_done);
/* agent_context.claim: data is the pool, key the agent's. */
int pool_claim(void *pool, const char *key);

/* This worktree to autokernel/<name>'s tip, clean; 0 or error(). */
int pool_sync(const char *name);
/* Lands HEAD, the candidate lc just kept (judge/loop.h), judging it again
 * on every newer tip: 0 landed, 1 rejected on a newer tip (an attempt),
 * 2 the tip has this kernel already, -1 error or interrupted. */
int pool_keep(struct loop_commit *lc);
/* What a worker that died left in this worktree: a kept commit not
 * landed is landed (judged again if the tip moved), a candidate not
 * judged is saved as an unjudged attempt, a Slurm job is cancelled; then
 * the worktree is clean.  0, or -1 after an error. */
int pool_recover(struct pool *p);

#endif
