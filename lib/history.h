/*
 * history.h: the experiments of a branch read back from git: kept commits
 * (first parents from HEAD down to the baseline) and, if asked, the
 * attempts tried on each, in the order they happened.  log, report, run
 * and the agents' prompts all read the branch through this.
 *
 *	struct history h = HISTORY_INIT;
 *	history_load(&h, "softmax", 1);          // with attempts
 *	for (size_t i = 0; i < h.nr; i++) ... h.e[i].status, h.e[i].note ...
 *	history_release(&h);
 */
#ifndef HISTORY_H
#define HISTORY_H

#include <git2.h>
#include <jansson.h>

struct experiment {
	git_oid id;
	int attempt;            /* attempt number, 0 for a commit */
	const char *status;     /* baseline, kept, rejected, unverified */
	char *subject;          /* the hypothesis */
	char *message;
	json_t *note;           /* NULL when unverified */
	long long when;         /* commit time */
};

struct history {
	struct experiment *e;
	size_t nr, alloc;
	char name[256];
	double baseline_us;     /* the baseline's time, 0 if unknown */
};
#define HISTORY_INIT { NULL, 0, 0, "", 0 }

/* The first commit of the branch's experiment: the one that added
 * <name>/problem.json, walking first parents from head.  0 or -1. */
int history_baseline(git_oid *out, const char *name, const git_oid *head);
/* Whether tree (NULL: none) has path. */
int history_tree_has(git_tree *tree, const char *path);

/* 0, or -1 after an error (not on an experiment branch, no baseline). */
int history_load(struct history *h, const char *name, int attempts);
void history_release(struct history *h);

/* The short reason of a rejection: build, verify, slower, bench. */
const char *experiment_reason(const struct experiment *e);

#endif
