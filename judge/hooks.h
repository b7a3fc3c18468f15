/*
 * hooks.h: what the installed hooks run on autokernel/ branches.
 *
 *   pre-commit   judges the staged candidate (the index, not the work
 *                tree): build, the five stages, the interleaved benchmark
 *                against HEAD (and the baseline), and the keep rule; the
 *                result is saved as pending, keyed by tree and HEAD.  A
 *                tree judged against this HEAD before gets its recorded
 *                verdict (autokernel.rejudge measures it again); HEAD's
 *                own tree (an amend that rewords) keeps HEAD's result
 *   commit-msg   has the message: a kept candidate gets its trailers and
 *                is approved for post-commit; a rejected one is saved as
 *                an attempt commit and the commit is refused (the kernel
 *                reset to HEAD's where that loses nothing); a merge goes
 *                through when it leaves the experiment's directory alone
 *   post-commit  writes the approved pending result as the new commit's
 *                note (a --no-verify commit was never approved)
 *
 * The decision is made in pre-commit and enforced in commit-msg because
 * only commit-msg sees the message an attempt must keep.  Each returns
 * the hook's exit status: 0 lets git go on, 1 stops the commit.
 */
#ifndef JUDGE_HOOKS_H
#define JUDGE_HOOKS_H

#include <git2.h>

int hook_pre_commit(void);
int hook_commit_msg(const char *file);
int hook_post_commit(void);

/* What post-commit does, for any commit: its approved pending result, if
 * there is one, becomes its note.  1 written, 0 none, -1 error. */
int hook_note_commit(const git_oid *commit);

#endif
