/*
 * history.h: the experiments of a branch read back from git: kept commits
 * (first parents from HEAD down to the baseline) and, if asked, the
 * attempts tried on each, in the order they happened.  log, report, run
 * and the agents' prompts all read the branch through this.
 *
 *	struct history h = HISTORY_INIT;
 *	history_load(&h, "softmax", 1);          // with attempts
 *	for (size_t i = 0; i < h.nr; i++) ... h.e[i].status, h.e[i].result ...
 *	history_advise(&h);                      // how to fetch missing notes
 *	history_release(&h);
 *
 * Where a result comes from, in order: our note (refs/notes/autokernel),
 * a fetched one (refs/notes/remotes/<remote>/autokernel), else the
 * commit's Autokernel-* trailers (from_trailers: a clone without the
 * notes has no verdicts, tolerances or per-run details).  Attempts are
 * ours and the fetched ones (refs/autokernel/remotes/<remote>/attempts/),
 * each shown after the commit it was tried on; after a rebase, after that
 * commit's rewritten copy: the one whose note names the tree the attempt's
 * parent has (the note travels with notes.rewriteRef, which init sets), or
 * else that has its parent's author and message.
 */
#ifndef HISTORY_H
#define HISTORY_H

#include <git2.h>
#include <jansson.h>
#include "lib/result.h"

struct experiment {
	git_oid id;
	int attempt;            /* attempt number, 0 for a commit */
	char label[80];         /* an attempt's: "3", or "origin/3" fetched */
	char *ref;              /* an attempt's ref, NULL for a commit */
	size_t on;              /* an attempt: index of the commit tried on */
	const char *status;     /* baseline, kept, rejected, unverified */
	char *subject;          /* the hypothesis */
	char *message;
	struct result result;   /* its note read; result.note is NULL when
				 * unverified */
	int from_trailers;      /* note made from the message's trailers */
	long long when;         /* commit time */
};

struct history {
	struct experiment *e;
	size_t nr, alloc;
	char name[256];
	double baseline_us;     /* the baseline's time, 0 if unknown */
	int from_trailers;      /* experiments whose note is from trailers */
};
#define HISTORY_INIT { NULL, 0, 0, "", 0, 0 }

/* The first commit of the branch's experiment: the one that added
 * <name>/problem.json, walking first parents from head.  0 or -1. */
int history_baseline(git_oid *out, const char *name, const git_oid *head);
/* Whether tree (NULL: none) has path. */
int history_tree_has(git_tree *tree, const char *path);

/* 0, or -1 after an error (not on an experiment branch, no baseline). */
int history_load(struct history *h, const char *name, int attempts);
void history_release(struct history *h);

/* When results came from trailers, says so once on stderr, with the
 * command that fetches the notes. */
void history_advise(const struct history *h);
/* The remote the branch came from (its upstream), else "origin"; free()
 * it. */
char *history_remote(const struct history *h);

/* The short reason of a rejection: result_reason(). */
const char *experiment_reason(const struct experiment *e);
/* What decided: result.head_ratio, the median of the commit it was
 * judged against over its own, in the same interleaved run (>1 faster);
 * 0 when unknown (baseline, build or verify failure, trailers). */
double experiment_head_ratio(const struct experiment *e);
/* Whether e is a measured baseline or kept commit: not an attempt, a
 * note, status baseline or kept. */
int experiment_is_kept(const struct experiment *e);

/*
 * Two commits of a branch that are easily mistaken for each other:
 *
 * history_best(): the best, the fastest measured kept commit (kept by
 * experiment_is_kept(), the lowest result.time_us above 0; the older of
 * two equal), or NULL when none was measured.  What the report calls
 * the best and `run` shows in its progress line.
 *
 * history_current(): the newest kept commit with a note: the branch's
 * tip unless that is unverified.  The tip is what the next candidate is
 * judged against and what the agent edits ("the current best" of
 * git-autokernel(1) and doc/parallel.md), so the agents' prompt states
 * its time as the one to beat and as the time of the kernel shown; the
 * fastest may be an older commit (a kept commit is faster than its
 * parent in one run, not always in the next), whose time is no bar for
 * a candidate that does not start from it.
 */
const struct experiment *history_best(const struct history *h);
const struct experiment *history_current(const struct history *h);

#endif
