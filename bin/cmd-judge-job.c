/*
 * cmd-judge-job.c: `judge-job`, what a Slurm job of `run --slurm` runs
 * (judge/slurm.h): one commit's tree judged against its parent as the
 * hooks would judge it, the result written as JSON for the submitting
 * host, which records it.  Not in the command list: no one types it.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "bin/builtin.h"
#include "judge/staged.h"
#include "lib/repo.h"

static const char usage_judge_job[] =
	"usage: git autokernel judge-job [--name NAME] [--output FILE] COMMIT\n"
	"\n"
	"Judges COMMIT's tree against its parent (build, the five stages, the\n"
	"benchmark, the keep rule) and writes the result JSON to FILE (or\n"
	"stdout); records nothing.  What `run --slurm` submits.\n";

/* Who judged it, for the note and the submitting host's output. */
static void judged_by(json_t *res)
{
	const char *job = getenv("SLURM_JOB_ID");
	char host[256] = "";
	struct strbuf by = STRBUF_INIT;

	gethostname(host, sizeof(host) - 1);
	if (job)
		strbuf_addf(&by, "Slurm job %s on %s", job, host);
	else
		strbuf_addf(&by, "judge-job on %s", host);
	json_object_set_new(res, "judged_by", json_string(by.buf));
	strbuf_release(&by);
}

static int write_result(json_t *res, const char *out)
{
	char *text = json_dumps(res, JSON_INDENT(1) | JSON_SORT_KEYS);
	int ret = 0;

	if (!out)
		printf("%s\n", text);
	else if (write_file_atomic(out, text, strlen(text)) < 0)
		ret = 3;
	free(text);
	return ret;
}

int cmd_judge_job(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "name", required_argument, NULL, 'n' },
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *out = NULL;
	char *name = NULL;
	git_object *obj = NULL;
	git_commit *c = NULL;
	json_t *res = NULL;
	int opt, rc;

	while ((opt = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
		switch (opt) {
		case 'n': free(name); name = xstrdup(optarg); break;
		case 'o': out = optarg; break;
		default:
			free(name);
			return usage_with(usage_judge_job, opt == 'h');
		}
	}
	if (optind != argc - 1) {
		free(name);
		return usage_with(usage_judge_job, 0);
	}
	if (!name)
		name = repo_branch_name();
	if (git_revparse_single(&obj, repo_need(), argv[optind]) < 0 ||
	    git_object_peel((git_object **)&c, obj, GIT_OBJECT_COMMIT) < 0) {
		rc = error("unknown commit '%s'", argv[optind]) ? 2 : 2;
		goto cleanup;
	}
	if (!name) {
		rc = error("which experiment? (--name)") ? 2 : 2;
		goto cleanup;
	}
	rc = experiment_judge(&res, name, git_commit_tree_id(c),
			      git_commit_parentcount(c) ?
			      git_commit_parent_id(c, 0) : NULL, stderr);
	if (!rc) {
		judged_by(res);
		rc = write_result(res, out);
	}
cleanup:
	json_decref(res);
	git_commit_free(c);
	git_object_free(obj);
	free(name);
	return rc;
}
