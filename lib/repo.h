/*
 * repo.h: the repository, through libgit2.  One repository per process,
 * opened from the current directory on first use.
 *
 *	git_repository *repo = repo_get();          // NULL: not in a repo
 *	const char *dir = repo_autokernel_dir();    // $GIT_DIR/autokernel
 *	char *name = repo_branch_name();            // "softmax" on
 *						    // autokernel/softmax
 *
 * Config: config_*() read git config (all levels, as git does) through
 * libgit2; the defaults are the tool's (git-autokernel(1), CONFIGURATION).
 * Strings returned by repo_* are the caller's to free() unless const.
 */
#ifndef REPO_H
#define REPO_H

#include <git2.h>
#include "lib/strbuf.h"

git_repository *repo_get(void);
/* Dies with exit 3 outside a repository. */
git_repository *repo_need(void);
void repo_close(void);
const char *repo_gitdir(void);          /* absolute, with trailing '/' */
const char *repo_workdir(void);         /* absolute, with trailing '/' */
const char *repo_autokernel_dir(void);  /* created on demand */
/* The same under the common git directory, which every worktree of the
 * repository shares (the main worktree's $GIT_DIR/autokernel): for what
 * concerns the repository, not one work tree (device ceilings, workers). */
const char *repo_shared_dir(void);

/* Branch name without refs/heads/, or NULL (detached, unborn ok). */
char *repo_current_branch(void);
/* The experiment's name on autokernel/<name> (or in a worker's detached
 * worktree, the one its $GIT_DIR/autokernel/experiment names), or NULL
 * elsewhere. */
char *repo_branch_name(void);

/* The message of libgit2's last error, or a fallback. */
const char *repo_error(void);

/* git config, re-read on every call so hooks see fresh values. */
char *config_string(const char *key, const char *def);
int config_int(const char *key, int def);
int config_bool(const char *key, int def);
double config_double(const char *key, double def);
/* A fraction: "1%", "0.01" or "1" (parse_fraction()), else def. */
double config_fraction(const char *key, double def);
/* autokernel.minGain, default 1%. */
double config_min_gain(void);
/* autokernel.maxShapeRegression, default 0%. */
double config_max_shape_regression(void);
int config_timeout_ms(void);

/* The first parent of commit: 0, 1 when it has none, -1 after an error. */
int repo_first_parent(git_oid *out, const git_oid *commit);

/* Writes the blob at path in tree-ish rev ("HEAD", a commit, or NULL for
 * the index) into out; 0, 1 when absent, -1 on error. */
int repo_read_file(struct strbuf *out, const char *rev, const char *path);



/* Runs `git ARGS...` (NULL-terminated) in the work tree's top (or cwd),
 * stdout into out if not NULL; its stderr passes through unless quiet.
 * Returns git's exit status, or -1. */
int git_cmd(struct strbuf *out, int quiet, ...);
#endif
