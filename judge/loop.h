/*
 * loop.h: the experiment loop's mechanics, what `run` does around an
 * agent's edit: the work tree before and after, the scope of an edit,
 * the commit through the hooks (which decide), and the records of an
 * experiment that never reached a commit.  Nothing here knows the
 * agents: bin/cmd-run.c asks one for an edit, then calls these.
 *
 *	struct strbuf before = STRBUF_INIT;
 *	strbuf_addch(&before, '\n');
 *	loop_untracked(&before);                // what was there
 *	... the agent edits the kernel ...
 *	loop_out_of_scope(&bad, "softmax/kernel.c", before.buf);
 *	struct loop_commit lc = LOOP_COMMIT_INIT;
 *	lc.name = "softmax"; lc.kernel = "softmax/kernel.c";
 *	lc.message = "hypothesis";
 *	rc = loop_commit(&lc);                  // 0 kept, 1 rejected, -1
 *	loop_commit_release(&lc);
 *	loop_restore_tree(before.buf);          // back to HEAD, clean
 */
#ifndef JUDGE_LOOP_H
#define JUDGE_LOOP_H

#include <jansson.h>
#include "lib/run.h"
#include "lib/strbuf.h"

/* No changes to tracked files (untracked ones do not count). */
int loop_tree_is_clean(void);
/* The untracked, unignored paths, one per line, appended to out. */
void loop_untracked(struct strbuf *out);
/* Back to HEAD: the index, the tracked files, and the untracked files
 * not in before_untracked (a "\n"-framed list from loop_untracked()). */
void loop_restore_tree(const char *before_untracked);
/* Paths changed besides kernel, comma-separated into bad. */
void loop_out_of_scope(struct strbuf *bad, const char *kernel,
		       const char *before_untracked);
int loop_kernel_changed(const char *kernel);
/* The work tree's candidate saved as an attempt without the hooks, for
 * an experiment that never reached a commit; 0 or error(). */
int loop_save_unjudged(const char *name, const char *subject,
		       const char *reason, const char *verdict);
int loop_count_attempts(const char *name);

struct slurm;

struct loop_commit {
	const char *name;       /* the experiment */
	const char *kernel;     /* its path in the work tree */
	const char *message;    /* the hypothesis */
	struct strvec env;      /* for the hooks, "NAME=value" */
	/* called about every 200 ms with the judgement's phase */
	void (*tick)(const char *phase, void *data);
	void *tick_data;
	/* run --slurm: judged by a Slurm job first (judge/slurm.h), whose
	 * result the hooks then record as a verdict judged before */
	const struct slurm *slurm;
	json_t *result;         /* after loop_commit(): the judgement (the
				 * kept commit's note, the rejection) or NULL */
	struct strbuf phase_path;
};
#define LOOP_COMMIT_INIT { .env = STRVEC_INIT, .phase_path = STRBUF_INIT }

/* `git add` and `git commit` of the kernel, so that the hooks judge it:
 * 0 kept, 1 rejected (a new attempt, or a rejection on record for the
 * same tree; with slurm, also a job that ended without a result, saved
 * as an unjudged attempt), -1 the commit failed for another reason (its
 * output printed unless interrupted). */
int loop_commit(struct loop_commit *lc);
void loop_commit_release(struct loop_commit *lc);

/* HEAD's note written from its pending result if a killed post-commit
 * left none. */
void loop_repair_head(void);
/* Checks out autokernel/<name> unless it is the branch; 0 or error(). */
int loop_switch_to(const char *name);

#endif
