/*
 * records.h: what lands in git (SPEC section 7).
 *
 *   trailers  Autokernel-* lines at the end of a kept commit's message
 *   notes     the full result as JSON on refs/notes/autokernel
 *   attempts  rejected candidates as commits on
 *             refs/autokernel/attempts/<name>/<n> (parent: the commit tried
 *             on), verdict in the message, result as a note
 *   pending   a hook's result between pre-commit and post-commit, in
 *             $GIT_DIR/autokernel/pending/<tree>-<head>.json, so the same
 *             staged tree against the same HEAD is never measured twice
 *
 *	json_t *note = note_read(&commit_id);           // NULL if none
 *	note_write(&commit_id, result);                 // 0 or error()
 *	attempt_save(&n, &attempt_id, "softmax", &tree, &head, msg, result);
 */
#ifndef RECORDS_H
#define RECORDS_H

#include <git2.h>
#include <jansson.h>
#include "lib/strbuf.h"

#define NOTES_REF "refs/notes/autokernel"
#define ATTEMPTS_PREFIX "refs/autokernel/attempts/"

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

json_t *note_read(const git_oid *commit);
int note_write(const git_oid *commit, json_t *note);

/* Saves a rejected candidate; *n is its number.  0 or error(). */
int attempt_save(int *n, git_oid *out, const char *name, const git_oid *tree,
		 const git_oid *parent, const char *message, json_t *note);

struct attempt {
	int n;
	git_oid id;
};
/* The attempts of name in number order; free() the array. */
int attempts_list(struct attempt **out, const char *name);

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
