/*
 * records.h: what lands in git (git-autokernel(1), DESCRIPTION and
 * RESULTS IN GIT; doc/sharing.md).
 *
 *   trailers  Autokernel-* lines at the end of a kept commit's message
 *   notes     the full result as JSON on refs/notes/autokernel
 *   attempts  rejected candidates as commits on
 *             refs/autokernel/attempts/<name>/<n> (parent: the commit tried
 *             on), verdict in the message, result as a note
 *   fetched   what `git fetch` brings with init --share's refspecs: the
 *             remote's notes in refs/notes/remotes/<remote>/autokernel,
 *             its attempts under refs/autokernel/remotes/<remote>/attempts/
 *   pending   a hook's result between pre-commit and post-commit, in
 *             $GIT_DIR/autokernel/pending/<tree>-<head>.json, so the same
 *             staged tree against the same HEAD is never measured twice
 *
 *	json_t *note = note_read(&commit_id);           // NULL if none
 *	if (!note)                                      // a clone without
 *		note = note_from_trailers(message);     // the notes
 *	note_write(&commit_id, result);                 // 0 or error()
 *	note_set(&commit_id, "torch", figures);         // one key of it
 *	attempt_save(&n, &attempt_id, "softmax", &tree, &head, msg, result);
 */
#ifndef RECORDS_H
#define RECORDS_H

#include <git2.h>
#include <jansson.h>
#include "lib/strbuf.h"

#define NOTES_REF "refs/notes/autokernel"
#define ATTEMPTS_PREFIX "refs/autokernel/attempts/"
#define NOTES_FETCHED_GLOB "refs/notes/remotes/*/autokernel"
#define ATTEMPTS_FETCHED_PREFIX "refs/autokernel/remotes/"

struct trailer {
	const char *key, *value;
};

/* Appends trailers to msg: a blank line, then "Key: value" lines.
 * Autokernel-* trailers already in msg are replaced, not repeated. */
void trailers_apply(struct strbuf *msg, const struct trailer *t, int n);
/* The value of trailer key in msg, or NULL; the caller frees it. */
char *trailer_get(const char *msg, const char *key);
/* Strips git's comment lines ('#') and trailing blank lines. */
void message_cleanup(struct strbuf *msg);

/* The note of commit: ours in refs/notes/autokernel, else a fetched one
 * (NOTES_FETCHED_GLOB), read without merging it into ours; NULL if none.
 * The caller owns the result. */
json_t *note_read(const git_oid *commit);
/* What the Autokernel-* trailers of a message say, as a note's fields:
 * source "trailers", status (kept or rejected), op, backend, device.name,
 * verify, time_us, speedup, roofline, and an attempt's reason and verdict;
 * NULL when msg has no Autokernel-Verify trailer.  The caller owns it. */
json_t *note_from_trailers(const char *msg);
int note_write(const git_oid *commit, json_t *note);
/* Sets key to value in commit's note (ours, else a fetched one, which
 * becomes ours), read and written as one compare-and-swap: a writer in
 * between makes it read again.  0, or -1 after an error (commit has no
 * note). */
int note_set(const git_oid *commit, const char *key, json_t *value);

/* Saves a rejected candidate; *n is its number.  0 or error(). */
int attempt_save(int *n, git_oid *out, const char *name, const git_oid *tree,
		 const git_oid *parent, const char *message, json_t *note);

struct attempt {
	int n;
	git_oid id;
	char remote[64];        /* "" for ours, else the remote it came from */
	char ref[320];          /* the full ref name */
};
/* Our attempts of name in number order (what numbers a new one); the
 * count, or -1.  free() the array. */
int attempts_list(struct attempt **out, const char *name);
/* Ours, then each remote's fetched ones in number order; a commit under
 * two names is listed once, as ours if it is.  The count, or -1. */
int attempts_list_all(struct attempt **out, const char *name);

/* Pending results: key is "<tree>-<head>" (head "0" when unborn). */
void pending_key(struct strbuf *key, const git_oid *tree, const git_oid *head);
int pending_save(const char *key, json_t *result);
json_t *pending_load(const char *key);
void pending_remove(const char *key);
/* When a pending result was saved (seconds since the epoch), or 0. */
long long pending_time(const char *key);

/* The index the hooks must read: $GIT_INDEX_FILE when git set it. */
int repo_hook_index(git_index **out);
/* The id of HEAD's commit; 1 when HEAD is unborn. */
int repo_head(git_oid *out);

/* One run per repository: $GIT_DIR/autokernel/run.lock with our pid;
 * a lock whose process is gone is taken over with a warning. */
int lock_acquire(const char *what);
void lock_release(void);

#endif
