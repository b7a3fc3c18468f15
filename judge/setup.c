/*
 * setup.c: a repository made ready for experiments (judge/setup.h).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "judge/setup.h"
#include "lib/paths.h"
#include "lib/records.h"
#include "lib/repo.h"
#include "verify/runners.h"
#include "verify/client.h"

static const char *const hook_names[] = {
	"pre-commit", "commit-msg", "post-commit",
};

static int is_installed_name(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(hook_names); i++)
		if (!strcmp(hook_names[i], name))
			return 1;
	return 0;
}

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

/* $GIT_DIR/autokernel/hooks: ours when core.hooksPath names the user's. */
static void private_hooks_dir(struct strbuf *dir)
{
	strbuf_addf(dir, "%s/hooks", repo_autokernel_dir());
}

/* A hook in the user's directory, run through ours as the chained one. */
static int chain_user_hook(const char *dir, const char *user_dir,
			   const char *name)
{
	struct strbuf path = STRBUF_INIT, text = STRBUF_INIT;
	int ret = 0;

	strbuf_addf(&path, "%s/%s%s", dir, name, is_installed_name(name) ?
		    ".autokernel-chained" : "");
	strbuf_addf(&text, "#!/bin/sh\n# Installed by git-autokernel: the hook "
		    "of core.hooksPath before 'git autokernel init'\n"
		    "# (autokernel.userHooksPath); it runs as it did.\n"
		    "hook='%s/%s'\ntest -x \"$hook\" || exit 0\n"
		    "exec \"$hook\" \"$@\"\n", user_dir, name);
	if (write_file_atomic(path.buf, text.buf, text.len) < 0 ||
	    chmod(path.buf, 0755) < 0)
		ret = error_errno("unable to install '%s'", path.buf);
	strbuf_release(&path);
	strbuf_release(&text);
	return ret;
}

/*
 * core.hooksPath names a directory of the user's: often tracked in the
 * work tree, or shared by all their repositories.  Nothing there is
 * written.  Our hooks go to a private directory that core.hooksPath of
 * this repository then names; every hook of the user's directory runs
 * from there as before (ours chain theirs), and the old value is kept
 * in autokernel.userHooksPath.  0 and the directory in dir, or -1.
 */
static int redirect_hooks(struct strbuf *dir, const char *user, int quiet)
{
	struct strbuf abs = STRBUF_INIT, names = STRBUF_INIT;
	DIR *d;
	struct dirent *e;
	int ret = 0;

	private_hooks_dir(dir);
	if (!strcmp(user, dir->buf))
		return 0;               /* done before */
	if (*user == '/')
		strbuf_addstr(&abs, user);
	else
		strbuf_addf(&abs, "%s%s", repo_workdir(), user);
	if (mkdir_p(dir->buf) < 0)
		return -1;
	if ((d = opendir(abs.buf))) {
		while ((e = readdir(d)) && !ret) {
			struct strbuf p = STRBUF_INIT;

			strbuf_addf(&p, "%s/%s", abs.buf, e->d_name);
			/* not *.sample, nor ours from an earlier init */
			if (e->d_name[0] != '.' && !strstr(e->d_name, ".") &&
			    access(p.buf, X_OK) == 0 && !is_ours(p.buf)) {
				ret = chain_user_hook(dir->buf, abs.buf,
						      e->d_name);
				strbuf_addf(&names, " %s", e->d_name);
			}
			strbuf_release(&p);
		}
		closedir(d);
	}
	if (!ret && (git_cmd(NULL, 0, "config", "autokernel.userHooksPath",
			     user, NULL) ||
		     git_cmd(NULL, 0, "config", "core.hooksPath", dir->buf,
			     NULL)))
		ret = error("unable to set core.hooksPath");
	if (!ret && !quiet) {
		printf("core.hooksPath '%s' is yours: left untouched; this "
		       "repository's core.hooksPath is now '%s' (the old "
		       "value is in autokernel.userHooksPath)\n", user,
		       dir->buf);
		if (names.len)
			printf("your hooks there run first, as before:%s\n",
			       names.buf);
		printf("a hook you add to '%s' later runs after 'git "
		       "autokernel init' again\n", user);
	}
	strbuf_release(&abs);
	strbuf_release(&names);
	return ret;
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
	char *user = NULL;
	int ret = 0;

	repo_need();
	user = config_string("core.hooksPath", NULL);
	if (user ? redirect_hooks(&dir, user, quiet) < 0 : hooks_dir(&dir) < 0) {
		strbuf_release(&dir);
		free(user);
		return -1;
	}
	free(user);
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
	/* CUDA C++ where nvcc built its runner, else HIP, else Triton */
	static const char *const order[] = { "cuda", "hip", "triton" };
	static const char *best;

	if (best)
		return best;
	best = "host";
	for (size_t i = 0; i < ARRAY_SIZE(order); i++) {
		struct runner r = RUNNER_INIT;
		struct strbuf why = STRBUF_INIT;
		int ok;

		if (!runner_worth_asking(order[i]) ||
		    runner_present(order[i], NULL) < 0)
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

