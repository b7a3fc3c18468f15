/*
 * setup.h: a repository made ready for experiments, shared by init, start
 * and demo.
 *
 *	if (setup_repository(0) < 0) ...        // hooks and default config
 *	char *backend = default_backend();      // free() it
 *
 * The hooks go to the effective hooks directory.  Without core.hooksPath
 * that is $GIT_DIR/hooks, where a hook of the user's is kept as
 * <name>.autokernel-chained and runs first.  A core.hooksPath names a
 * directory of the user's (often tracked, or shared by all their
 * repositories): nothing there is written; our hooks go to
 * $GIT_DIR/autokernel/hooks, which this repository's core.hooksPath then
 * names, and every hook of the user's directory runs from there as before
 * (the old value is kept in autokernel.userHooksPath).
 */
#ifndef JUDGE_SETUP_H
#define JUDGE_SETUP_H

/* Installs the hooks and the default config; 0 or error(). */
int setup_repository(int quiet);
/* Whether our hooks are installed in the effective hooks directory. */
int hooks_installed(void);
/* The best backend with a device that answers: cuda, hip, else host. */
const char *best_backend(void);
/* The backend start should use: autokernel.backend, else best. */
char *default_backend(void);

#endif
