/*
 * python.h: the Python interpreter that imports torch.
 *
 * `e2e` runs its driver under it, and the tests ask for it through
 * `git autokernel e2e --which-python`, so one rule picks it everywhere:
 *
 *   1. git config autokernel.python (a command on PATH or a path);
 *   2. else $AUTOKERNEL_PYTHON;
 *   3. else the first of `python3` on PATH and /usr/bin/python3 that
 *      can `import torch`.
 *
 * An interpreter named by 1 or 2 is not second-guessed: if it cannot
 * import torch that is the error, and the others are not tried.  Each
 * candidate is asked once per process (`python -c "import torch"`, under
 * a time limit through run_child()).
 *
 *	const char *py = python_torch(&why);    // static, or NULL
 *	if (!py)
 *		return error("%s", why.buf), 3;     // in a command
 *
 * Returns the interpreter as it is to be run (a name looked up in PATH,
 * or a path), a static string that lives for the process; NULL when none
 * imports torch, with the reason in why ("no interpreter imports torch:
 * tried python3 (ModuleNotFoundError ...), /usr/bin/python3 (...)").
 */
#ifndef PYTHON_H
#define PYTHON_H

#include "lib/strbuf.h"

const char *python_torch(struct strbuf *why);

/* The directory python_torch()'s torch was imported from (the one
 * above torch/: site-packages, a user's ~/.local one, a virtual
 * environment's), static; NULL when none imports torch.  A runner's
 * cell reads it and puts it on PYTHONPATH, since the cell's HOME is not
 * the user's. */
const char *python_torch_site(void);

#endif
