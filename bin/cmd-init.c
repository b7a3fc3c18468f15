/*
 * cmd-init.c: `init`: hooks, config, the device's ceilings.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "builtin.h"
#include "judge.h"
#include "paths.h"
#include "records.h"
#include "repo.h"
#include "setup.h"

static const char usage_init[] =
	"usage: git autokernel init [--no-measure] [--share <remote>]\n"
	"\n"
	"Installs the pre-commit, commit-msg and post-commit hooks into the\n"
	"effective hooks directory (core.hooksPath honoured; an existing hook\n"
	"is kept and chained), sets default autokernel.* config, and measures\n"
	"the device's copy bandwidth and matrix rate once.  --share configures\n"
	"<remote> to fetch and push the notes and attempts refs.\n";

static const char *const hook_names[] = {
	"pre-commit", "commit-msg", "post-commit",
};

#define OUR_MARK "git autokernel hook"

static int hooks_dir(struct strbuf *dir)
{
	if (git_cmd(dir, 0, "rev-parse", "--git-path", "hooks", NULL))
		return error("unable to find the hooks directory");
	strbuf_trim(dir);
	return mkdir_p(dir->buf);
}

static int is_ours(const char *path)
{
	struct strbuf sb = STRBUF_INIT;
	int ours = strbuf_read_file(&sb, path) >= 0 && strstr(sb.buf, OUR_MARK);

	strbuf_release(&sb);
	return ours;
}

static int install_hook(const char *dir, const char *name, int quiet)
{
	struct strbuf src = STRBUF_INIT, dst = STRBUF_INIT, old = STRBUF_INIT;
	struct strbuf text = STRBUF_INIT;
	struct stat st;
	int ret = 0;

	strbuf_addf(&src, "%s/hooks/%s", ak_datadir(), name);
	strbuf_addf(&dst, "%s/%s", dir, name);
	strbuf_addf(&old, "%s/%s.autokernel-chained", dir, name);
	if (strbuf_read_file(&text, src.buf) < 0) {
		ret = error_errno("unable to read '%s'", src.buf);
		goto cleanup;
	}
	if (!lstat(dst.buf, &st) && !is_ours(dst.buf)) {
		if (!lstat(old.buf, &st)) {
			ret = error("'%s' exists and so does '%s': move one "
				    "away, then run init again", dst.buf, old.buf);
			goto cleanup;
		}
		if (rename(dst.buf, old.buf) < 0) {
			ret = error_errno("unable to keep '%s'", dst.buf);
			goto cleanup;
		}
		if (!quiet)
			printf("kept your %s hook: it runs first, as %s\n",
			       name, old.buf);
	}
	if (write_file_atomic(dst.buf, text.buf, text.len) < 0 ||
	    chmod(dst.buf, 0755) < 0)
		ret = error_errno("unable to install '%s'", dst.buf);
cleanup:
	strbuf_release(&src);
	strbuf_release(&dst);
	strbuf_release(&old);
	strbuf_release(&text);
	return ret;
}

int hooks_installed(void)
{
	struct strbuf dir = STRBUF_INIT, path = STRBUF_INIT;
	int ok = 1;

	if (hooks_dir(&dir) < 0)
		return 0;
	for (size_t i = 0; i < ARRAY_SIZE(hook_names); i++) {
		strbuf_reset(&path);
		strbuf_addf(&path, "%s/%s", dir.buf, hook_names[i]);
		ok &= is_ours(path.buf);
	}
	strbuf_release(&dir);
	strbuf_release(&path);
	return ok;
}

static int config_default(const char *key, const char *value)
{
	char *have = config_string(key, NULL);

	free(have);
	if (have)
		return 0;
	return git_cmd(NULL, 0, "config", key, value, NULL) ? -1 : 0;
}

static int config_rewrite_ref(void)
{
	struct strbuf out = STRBUF_INIT;
	int ret = 0;

	git_cmd(&out, 1, "config", "--get-all", "notes.rewriteRef", NULL);
	if (!strstr(out.buf, NOTES_REF))
		ret = git_cmd(NULL, 0, "config", "--add", "notes.rewriteRef",
			      NOTES_REF, NULL) ? -1 : 0;
	strbuf_release(&out);
	return ret;
}

int setup_repository(int quiet)
{
	struct strbuf dir = STRBUF_INIT;
	int ret = 0;

	repo_need();
	if (hooks_dir(&dir) < 0) {
		strbuf_release(&dir);
		return -1;
	}
	for (size_t i = 0; i < ARRAY_SIZE(hook_names) && !ret; i++)
		ret = install_hook(dir.buf, hook_names[i], quiet);
	if (!ret && (config_default("autokernel.agent", "tune") ||
		     config_default("autokernel.minGain", "1%") ||
		     config_default("autokernel.timeout", "30") ||
		     config_default("autokernel.resetOnFail", "true") ||
		     config_rewrite_ref()))
		ret = error("unable to set the default configuration");
	if (!ret && !quiet)
		printf("hooks installed in %s\n", dir.buf);
	strbuf_release(&dir);
	return ret;
}

const char *best_backend(void)
{
	static const char *const order[] = { "cuda", "hip" };
	static const char *best;

	if (best)
		return best;
	best = "host";
	for (size_t i = 0; i < ARRAY_SIZE(order); i++) {
		char runner[8192];
		struct runner r = RUNNER_INIT;
		struct strbuf why = STRBUF_INIT;
		int ok;

		snprintf(runner, sizeof(runner), "%s/ak-runner-%s",
			 ak_libexecdir(), order[i]);
		if (access(runner, X_OK))
			continue;
		ok = runner_start(&r, order[i], 60000, &why) == 0;
		runner_stop(&r);
		strbuf_release(&why);
		if (ok) {
			best = order[i];
			break;
		}
	}
	return best;
}

char *default_backend(void)
{
	char *b = config_string("autokernel.backend", NULL);

	return b ? b : xstrdup(best_backend());
}

static int measure(const char *backend)
{
	struct judge j = JUDGE_INIT;
	json_t *c;
	int rc = judge_start(&j, backend);

	if (rc)
		return rc;
	c = judge_ceilings(&j, 1);
	if (c) {
		json_t *m = json_object_get(c, "matrix_tflops");

		printf("%s: %s: copy %.0f GB/s", backend, judge_device_name(&j),
		       json_number_value(json_object_get(c, "copy_gbps")));
		if (m)
			printf(", matrix %.1f TFLOP/s bf16, %.1f f32",
			       json_number_value(json_object_get(m, "bf16")),
			       json_number_value(json_object_get(m, "f32")));
		printf("\n");
	}
	judge_stop(&j);
	return c ? 0 : 3;
}

int share_remote(const char *remote);

/* Before anything changes: init --share of a remote that does not exist
 * installs nothing. */
static int remote_exists(const char *remote)
{
	struct strbuf key = STRBUF_INIT;
	char *url;
	int found;

	strbuf_addf(&key, "remote.%s.url", remote);
	url = config_string(key.buf, NULL);
	found = url != NULL;
	strbuf_release(&key);
	free(url);
	if (!found)
		return error("no remote '%s' (git remote -v lists them)",
			     remote);
	return 0;
}

int cmd_init(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "no-measure", no_argument, NULL, 'n' },
		{ "share", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *share = NULL;
	int do_measure = 1, opt;
	char *backend;

	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (opt == 'n')
			do_measure = 0;
		else if (opt == 's')
			share = optarg;
		else
			return usage_with(usage_init, opt == 'h');
	}
	if (optind < argc)
		return usage_with(usage_init, 0);
	repo_need();
	if (share && remote_exists(share) < 0)
		return 3;
	if (setup_repository(0) < 0)
		return 3;
	if (share && share_remote(share) < 0)
		return 3;
	if (!do_measure)
		return 0;
	backend = default_backend();
	if (measure(backend)) {
		free(backend);
		return 3;
	}
	free(backend);
	return 0;
}

/*
 * Results travel with push and fetch: ours are pushed to the remote's
 * refs/notes/autokernel and attempts refs (never forced), theirs arrive
 * beside ours under refs/notes/remotes/<remote>/ and
 * refs/autokernel/remotes/<remote>/, so a fetch never overwrites a local
 * note; log and report read them there (lib/records.h), and
 * `git notes --ref=autokernel merge` makes them ours.  Once a remote has
 * push refspecs plain `git push` uses only those, so HEAD is one of them.
 */
int share_remote(const char *remote)
{
	struct strbuf key = STRBUF_INIT, val = STRBUF_INIT, have = STRBUF_INIT;
	static const char *const fetch[] = {
		"+" NOTES_REF ":refs/notes/remotes/%s/autokernel",
		"+" ATTEMPTS_PREFIX "*:refs/autokernel/remotes/%s/attempts/*",
	};
	static const char *const push[] = {
		"HEAD", NOTES_REF ":" NOTES_REF,
		ATTEMPTS_PREFIX "*:" ATTEMPTS_PREFIX "*",
	};
	size_t nr = ARRAY_SIZE(fetch) + ARRAY_SIZE(push);
	int ret = remote_exists(remote);

	for (size_t i = 0; i < nr && !ret; i++) {
		int is_fetch = i < ARRAY_SIZE(fetch);

		strbuf_reset(&key);
		strbuf_reset(&val);
		strbuf_reset(&have);
		strbuf_addf(&key, "remote.%s.%s", remote,
			    is_fetch ? "fetch" : "push");
		if (is_fetch)
			strbuf_addf(&val, fetch[i], remote);
		else
			strbuf_addstr(&val, push[i - ARRAY_SIZE(fetch)]);
		git_cmd(&have, 1, "config", "--get-all", key.buf, NULL);
		if (strstr(have.buf, val.buf))
			continue;
		if (git_cmd(NULL, 0, "config", "--add", key.buf, val.buf, NULL))
			ret = error("unable to set %s", key.buf);
	}
	if (!ret)
		printf("results of this repository now travel with "
		       "'git push %s' and 'git fetch %s'\n", remote, remote);
	strbuf_release(&key);
	strbuf_release(&val);
	strbuf_release(&have);
	return ret;
}
