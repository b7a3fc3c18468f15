#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/python.h"
#include "lib/repo.h"
#include "lib/run.h"

/* Long enough for a cold import of torch from a network file system. */
#define IMPORT_TIMEOUT_MS 120000

/* Where the found interpreter's torch is: the directory above torch/. */
static char site[4096];

/* Whether py can import torch (then site is where from); if not, why
 * (its last line of output). */
static int imports_torch(const char *py, struct strbuf *why)
{
	struct child c = CHILD_INIT;
	const char *last;
	char how[128];
	int rc;

	strvec_pushl(&c.args, py, "-c", "import os, torch; print(os.path."
		     "dirname(os.path.dirname(os.path.abspath(torch.__file__"
		     "))))", NULL);
	c.capture = 1;
	c.merge_err = 1;
	c.no_stdin = 1;
	c.timeout_ms = IMPORT_TIMEOUT_MS;
	rc = run_child(&c);
	if (rc) {
		strbuf_trim(&c.out);
		last = strrchr(c.out.buf, '\n');
		child_describe(&c, rc, how, sizeof(how));
		strbuf_addf(why, "%s%s (%s)", why->len ? ", " : "", py,
			    c.out.len ? (last ? last + 1 : c.out.buf) : how);
	} else {
		strbuf_trim(&c.out);
		last = strrchr(c.out.buf, '\n');
		snprintf(site, sizeof(site), "%s", last ? last + 1 : c.out.buf);
	}
	child_release(&c);
	return rc == 0;
}

/* The static copy python_torch() returns. */
static const char *keep(const char *py)
{
	static char found[4096];

	snprintf(found, sizeof(found), "%s", py);
	return found;
}

/* An interpreter the user named: it, or the reason it will not do. */
static const char *named(const char *py, const char *origin,
			 struct strbuf *why)
{
	if (imports_torch(py, why))
		return keep(py);
	strbuf_insert_front(why, ": cannot import torch: ");
	strbuf_insert_front(why, origin);
	return NULL;
}

const char *python_torch(struct strbuf *why)
{
	static const char *const candidates[] = {
		"python3", "/usr/bin/python3",
	};
	static const char *found;
	char *conf;
	const char *env;

	if (found)
		return found;
	if ((conf = config_string("autokernel.python", NULL))) {
		found = named(conf, "autokernel.python", why);
		free(conf);
		return found;
	}
	env = getenv("AUTOKERNEL_PYTHON");
	if (env && *env)
		return found = named(env, "$AUTOKERNEL_PYTHON", why);
	for (size_t i = 0; i < ARRAY_SIZE(candidates); i++)
		if (imports_torch(candidates[i], why))
			return found = keep(candidates[i]);
	strbuf_insert_front(why, "no interpreter imports torch: tried ");
	return NULL;
}

const char *python_torch_site(void)
{
	struct strbuf why = STRBUF_INIT;
	const char *py = python_torch(&why);

	strbuf_release(&why);
	return py && site[0] == '/' ? site : NULL;
}
