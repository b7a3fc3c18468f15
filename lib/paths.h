/*
 * paths.h: where the tool's own files are.  The binary finds them relative
 * to itself, so a build tree, an install under any PREFIX and an unpacked
 * bundle all work without configuration:
 *
 *   build tree    build/git-autokernel, runners in build/, data in the
 *                 source root (include/, kernels/, hooks/, doc/)
 *   installed     PREFIX/bin/git-autokernel, runners in
 *                 PREFIX/libexec/git-autokernel, data in
 *                 PREFIX/share/git-autokernel
 *
 * AUTOKERNEL_HOME overrides the data directory.  Returned strings are
 * static and live for the process.
 */
#ifndef PATHS_H
#define PATHS_H

const char *ak_datadir(void);
const char *ak_libexecdir(void);
const char *ak_exe(void);               /* absolute path of this binary */
/* The per-user cache ($AUTOKERNEL_CACHE, $XDG_CACHE_HOME/git-autokernel
 * or ~/.cache/git-autokernel), created on demand. */
const char *ak_cachedir(void);
/* mkdir -p; 0 or error(). */
int mkdir_p(const char *path);
/* rm -rf; 0 or -1 (errors ignored past the first). */
int remove_tree(const char *path);

#endif
