/*
 * export.h: kept kernels as a Python package (doc/pytorch.md).
 *
 * export_package() takes, for each autokernel branch named (every
 * autokernel/... branch when none is), its newest verified kept commit: the
 * tip, or with a warning the newest commit below it that has a note (a
 * tip committed with --no-verify has none).  It writes a package
 * directory that registers them as torch.ops.autokernel.<name>:
 *
 *	DIR/__init__.py, _*.py        python/autokernel_ops/, the template
 *	DIR/setup.py                  for `pip install DIR`, offline
 *	DIR/include/                  autokernel.h and the optional
 *	                              helpers (ak-half.h), for a rebuild
 *	                              on another device
 *	DIR/manifest.json             per kernel: name, op, backend, dtypes,
 *	                              the verified shapes, tolerances, commit,
 *	                              device, the compile command and compiler
 *	DIR/kernels/<name>/           problem.json, the kernel source, and
 *	                              <arch>.so built by build_kernel() for
 *	                              the device of the commit's note
 *
 * The package is written beside DIR and renamed into place, so DIR is
 * never half-written; an earlier export in DIR is replaced, any other
 * non-empty DIR is refused.
 *
 *	struct export ex = EXPORT_INIT;
 *	if (export_package(&ex, "autokernel_ops", revs, nrevs) < 0) ...
 *	for (size_t i = 0; i < ex.nr; i++) ... ex.k[i].name, ex.k[i].commit
 *	export_release(&ex);
 *
 * export_read() fills ex from the manifest of a package already written.
 * Both return 0, AK_EUSAGE (lib/usage.h) for a revision that names no
 * experiment, or -1 (repository state, files: exit 3); an error has been
 * printed.
 */
#ifndef EXPORT_H
#define EXPORT_H

#include <git2.h>
#include "lib/usage.h"

struct export_kernel {
	char name[256];         /* the experiment: autokernel/<name> */
	char torch_name[264];   /* torch.ops.autokernel.<torch_name>: the
				 * name with '.' and '-' as '_' */
	char label[300];        /* the branch, or the revision as given */
	git_oid tip;            /* what label names */
	git_oid commit;         /* what was exported */
};

struct export {
	struct export_kernel *k;
	size_t nr, alloc;
};
#define EXPORT_INIT { NULL, 0, 0 }

int export_package(struct export *ex, const char *dir,
		   const char *const *revs, int nrevs);
int export_read(struct export *ex, const char *dir);
void export_release(struct export *ex);

#endif
