/*
 * cmd-e2e.c: `e2e [<rev>...] [--record] [-o DIR] -- python3 SCRIPT`: the
 * user's model with and without the exported kernels (e2e.h).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "bin/builtin.h"
#include "export/e2e.h"
#include "lib/python.h"
#include "lib/repo.h"
#include "lib/tempdir.h"

static const char usage_e2e[] =
	"usage: git autokernel e2e [<rev>...] [--record] [-o DIR] [--json]\n"
	"                          [--timeout SECONDS] -- python3 SCRIPT [ARG]\n"
	"   or: git autokernel e2e --which-python\n"
	"\n"
	"Exports the kernels of the branches named (default: every\n"
	"autokernel/* branch) into DIR, or uses the export already in DIR,\n"
	"and runs SCRIPT's autokernel_model() eager and patched: the time of\n"
	"each, and the accuracy of each against an fp32 run of the same\n"
	"model (fp64 on the CPU).  Exit 1 when the patched model's error\n"
	"exceeds the eager model's by more than 10%.  --record adds the\n"
	"result to the note of each exported commit.  --which-python prints\n"
	"the interpreter that imports torch, which runs the driver.\n";

struct e2e_cmd {
	struct e2e_opts run;
	const char *dir;
	const char *const *revs;
	int nrevs, record, which_python;
};

static int parse_e2e(int argc, char **argv, struct e2e_cmd *o)
{
	static const struct option opts[] = {
		{ "record", no_argument, NULL, 'r' },
		{ "output", required_argument, NULL, 'o' },
		{ "json", no_argument, NULL, 'j' },
		{ "timeout", required_argument, NULL, 't' },
		{ "which-python", no_argument, NULL, 'w' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int dashdash = argc, opt;

	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--")) {
			dashdash = i;
			break;
		}
	while ((opt = getopt_long(dashdash, argv, "ho:", opts, NULL)) != -1) {
		switch (opt) {
		case 'r': o->record = 1; break;
		case 'o': o->dir = optarg; break;
		case 'j': o->run.json = 1; break;
		case 't': o->run.timeout_s = atoi(optarg); break;
		case 'w': o->which_python = 1; break;
		default: return usage_with(usage_e2e, opt == 'h') ? 2 : -1;
		}
	}
	o->revs = (const char *const *)argv + optind;
	o->nrevs = dashdash - optind;
	if (dashdash + 1 < argc)
		o->run.cmd = (const char *const *)argv + dashdash + 1;
	if (o->which_python)
		return 0;
	if (!o->run.cmd || o->run.timeout_s <= 0)
		return usage_with(usage_e2e, 0);
	return 0;
}

static int which_python(void)
{
	struct strbuf why = STRBUF_INIT;
	const char *py = python_torch(&why);

	if (py)
		printf("%s\n", py);
	else
		error("%s", why.buf);
	strbuf_release(&why);
	return py ? 0 : 3;
}

/* An export already in DIR is used as it is, unless revisions are named. */
static int reuse(const struct e2e_cmd *o)
{
	char path[4200];

	snprintf(path, sizeof(path), "%s/manifest.json", o->dir);
	return !o->nrevs && !access(path, R_OK);
}

/* Exports into o->dir, or into a fresh temporary directory, *tmp, which
 * the caller removes. */
static int export_for_e2e(struct export *ex, struct strbuf *pkg, char **tmp,
			  const struct e2e_cmd *o)
{
	int rc;

	repo_need();
	if (o->dir)
		strbuf_addstr(pkg, o->dir);
	else if ((*tmp = tempdir_make(repo_autokernel_dir())))
		strbuf_addf(pkg, "%s/autokernel_ops", *tmp);
	else
		return 3;
	rc = export_package(ex, pkg->buf, o->revs, o->nrevs);
	return rc == AK_EUSAGE ? EXIT_USAGE : rc ? EXIT_ENV : EXIT_OK;
}

int cmd_e2e(int argc, char **argv)
{
	struct e2e_cmd o = { .run = E2E_OPTS_INIT };
	struct export ex = EXPORT_INIT;
	struct strbuf pkg = STRBUF_INIT;
	json_t *result = NULL;
	char *tmp = NULL;
	int rc;

	if ((rc = parse_e2e(argc, argv, &o)))
		return rc < 0 ? 0 : rc;
	if (o.which_python)
		return which_python();
	if (o.record)
		repo_need();
	if (o.dir && reuse(&o)) {
		strbuf_addstr(&pkg, o.dir);
		rc = export_read(&ex, o.dir) ? 3 : 0;
	} else {
		rc = export_for_e2e(&ex, &pkg, &tmp, &o);
	}
	if (rc)
		goto cleanup;
	o.run.package = pkg.buf;
	rc = exit_code(e2e_run(&o.run, o.record ? &result : NULL));
	if (result && e2e_record(&ex, result) < 0)
		rc = EXIT_ENV;
cleanup:
	json_decref(result);
	export_release(&ex);
	tempdir_remove(tmp);
	free(tmp);
	strbuf_release(&pkg);
	return rc;
}
