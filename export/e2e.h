/*
 * e2e.h: a user's model with and without the exported kernels
 * (doc/pytorch.md).  The work is python/autokernel_e2e.py's, the driver:
 * it loads SCRIPT's autokernel_model(), times the model eager and patched,
 * judges the patched model's accuracy against an fp32 run of the same
 * model (fp64 on the CPU) and prints a table or JSON.  e2e_run() starts
 * it under the interpreter that imports torch (python.h), through
 * run_child() with a time limit.
 *
 *	struct e2e_opts o = E2E_OPTS_INIT;
 *	o.package = "autokernel_ops";   // an export's directory
 *	o.cmd = argv;                   // python3 SCRIPT [args], NULL-ended
 *	json_t *result = NULL;
 *	rc = e2e_run(&o, &result);      // result: the caller's
 *	if (result && e2e_record(&ex, result) < 0) ...
 *
 * e2e_run() returns 0 (accurate), or after a message -1 (accuracy
 * failed, SCRIPT raised, or the driver timed out or was killed),
 * AK_EUSAGE (no autokernel_model() in SCRIPT, a command that is not
 * python3 SCRIPT) or AK_EENV (no interpreter imports torch): exit_code()
 * makes it the driver's exit status.  *result is set on 0 and -1 when
 * the driver wrote one.
 */
#ifndef E2E_H
#define E2E_H

#include <jansson.h>
#include "export/export.h"

struct e2e_opts {
	const char *package;
	const char *const *cmd;
	int json;               /* the driver prints JSON, not the table */
	int timeout_s;
};
#define E2E_OPTS_INIT { NULL, NULL, 0, 1800 }

int e2e_run(const struct e2e_opts *o, json_t **result);

/* Adds result as "e2e" to the note of each exported commit (rewritten in
 * place); 0, or -1 after an error. */
int e2e_record(const struct export *ex, json_t *result);

#endif
