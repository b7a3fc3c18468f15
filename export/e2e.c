#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "export/e2e.h"
#include "lib/paths.h"
#include "lib/python.h"
#include "lib/records.h"
#include "lib/run.h"
#include "lib/tempdir.h"

/* A bare interpreter name (python, python3, python3.11): the one that
 * imports torch is used instead. */
static int is_python_name(const char *s)
{
	return starts_with(s, "python") && !strchr(s, '/');
}

/* The driver's command line for o->cmd: interpreter, driver, package,
 * result file, SCRIPT and its arguments.  0, or AK_EUSAGE or AK_EENV
 * after an error message. */
static int driver_args(struct strvec *args, const struct e2e_opts *o,
		       const char *out)
{
	const char *const *cmd = o->cmd;
	const char *py = NULL;
	struct strbuf why = STRBUF_INIT;

	if (is_python_name(cmd[0]) || ends_with(cmd[0], ".py")) {
		if (!ends_with(cmd[0], ".py"))
			cmd++;
		if (!(py = python_torch(&why))) {
			error("%s", why.buf);
			strbuf_release(&why);
			return AK_EENV;
		}
	} else {
		py = *cmd++;
	}
	strbuf_release(&why);
	if (!*cmd || **cmd == '-') {
		error("e2e runs a script: '-- python3 SCRIPT [args]'");
		return AK_EUSAGE;
	}
	strvec_pushl(args, py, "-u", NULL);
	strvec_pushf(args, "%s/python/autokernel_e2e.py", ak_datadir());
	strvec_pushl(args, "--package", o->package, "--json-out", out, NULL);
	if (o->json)
		strvec_push(args, "--json");
	strvec_push(args, "--");
	strvec_pushv(args, cmd);
	return 0;
}

/* The driver's exit status (0 accurate, 1 not, 2 usage, 3 environment)
 * as e2e_run() returns it. */
static int driver_status(struct child *c, int rc)
{
	static const int codes[] = { 0, -1, AK_EUSAGE, AK_EENV };
	char how[128];

	if (rc >= 0 && rc <= 3)
		return codes[rc];
	child_describe(c, rc, how, sizeof(how));
	error("the e2e driver %s", how);
	return rc < 0 ? AK_EENV : -1;
}

int e2e_run(const struct e2e_opts *o, json_t **result)
{
	struct child c = CHILD_INIT;
	struct strbuf out = STRBUF_INIT;
	char *tmp = tempdir_make(ak_cachedir());
	int rc;

	if (!tmp)
		return AK_EENV;
	strbuf_addf(&out, "%s/result.json", tmp);
	if ((rc = driver_args(&c.args, o, out.buf)))
		goto cleanup;
	c.no_stdin = 1;
	c.timeout_ms = o->timeout_s * 1000;
	rc = driver_status(&c, run_child(&c));
	if (result && (rc == 0 || rc == -1))
		*result = json_load_file(out.buf, 0, NULL);
cleanup:
	child_release(&c);
	tempdir_remove(tmp);
	free(tmp);
	strbuf_release(&out);
	return rc;
}

/* The commit's note with "e2e" set to result, written over the old one
 * (git_note_create(..., force=1), by note_write()). */
static int note_set_e2e(const git_oid *commit, json_t *result)
{
	json_t *note = note_read(commit);
	int ret;

	if (!note)
		return error("%.7s has no note to add the e2e result to",
			     git_oid_tostr_s(commit));
	json_object_set(note, "e2e", result);
	ret = note_write(commit, note);
	json_decref(note);
	return ret;
}

int e2e_record(const struct export *ex, json_t *result)
{
	int ret = 0;

	for (size_t i = 0; i < ex->nr; i++) {
		if (note_set_e2e(&ex->k[i].commit, result) < 0) {
			ret = -1;
			continue;
		}
		fprintf(stderr, "recorded the e2e result in the note of %s "
			"(%.7s)\n", ex->k[i].label,
			git_oid_tostr_s(&ex->k[i].commit));
	}
	return ret;
}
