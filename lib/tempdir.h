/*
 * tempdir.h: temporary directories that never outlive the tool.
 *
 *	char *dir = tempdir_make(repo_autokernel_dir());  // NULL: error()
 *	... write files under dir ...
 *	tempdir_remove(dir);                              // and free(dir)
 *	free(dir);
 *
 * A directory is named tmp-<pid>-XXXXXX under its parent and registered
 * until tempdir_remove(): a signal that kills the tool removes every
 * registered one (run.h's handler calls tempdir_remove_all()), and
 * tempdir_sweep() removes those whose process is gone (a SIGKILL, a
 * crash), so nothing is left behind on any path.
 */
#ifndef TEMPDIR_H
#define TEMPDIR_H

/* A fresh directory under parent; the caller free()s the path. */
char *tempdir_make(const char *parent);
/* rm -rf dir and forget it; NULL is ignored. */
void tempdir_remove(const char *dir);
/* Removes every registered directory; signal-safe. */
void tempdir_remove_all(void);
/* Removes parent's tmp-<pid>-* of processes that are gone, and the
 * older tmp-XXXXXX of earlier versions after an hour. */
void tempdir_sweep(const char *parent);

#endif
