#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "lib/paths.h"
#include <stdarg.h>
#include "lib/repo.h"
#include "lib/run.h"
#include "lib/tempdir.h"

static git_repository *repo;
static int inited, swept;
static char autokernel_dir[4200];

git_repository *repo_get(void)
{
	if (!inited) {
		git_libgit2_init();
		inited = 1;
	}
	if (!repo && git_repository_open_ext(&repo, ".", 0, NULL) < 0) {
		repo = NULL;
	} else if (!swept) {
		struct strbuf dir = STRBUF_INIT;

		/* what a killed judge left behind: see tempdir.h */
		swept = 1;
		strbuf_addf(&dir, "%sautokernel", git_repository_path(repo));
		tempdir_sweep(dir.buf);
		strbuf_release(&dir);
	}
	return repo;
}

git_repository *repo_need(void)
{
	if (!repo_get())
		die("not a git repository (or any of the parent directories)");
	return repo;
}

void repo_close(void)
{
	git_repository_free(repo);
	repo = NULL;
}

const char *repo_error(void)
{
	const git_error *e = git_error_last();

	return e && e->message ? e->message : "unknown libgit2 error";
}

const char *repo_gitdir(void)
{
	return git_repository_path(repo_need());
}

const char *repo_workdir(void)
{
	const char *w = git_repository_workdir(repo_need());

	if (!w)
		die("this operation must be run in a work tree");
	return w;
}

const char *repo_autokernel_dir(void)
{
	if (!autokernel_dir[0]) {
		snprintf(autokernel_dir, sizeof(autokernel_dir), "%sautokernel",
			 repo_gitdir());
		if (mkdir_p(autokernel_dir) < 0)
			die("cannot create '%s'", autokernel_dir);
	}
	return autokernel_dir;
}

const char *repo_shared_dir(void)
{
	static char dir[4200];

	if (!dir[0]) {
		snprintf(dir, sizeof(dir), "%sautokernel",
			 git_repository_commondir(repo_need()));
		if (mkdir_p(dir) < 0)
			die("cannot create '%s'", dir);
	}
	return dir;
}

char *repo_current_branch(void)
{
	git_reference *head = NULL;
	char *name = NULL;
	const char *target;

	if (git_reference_lookup(&head, repo_need(), "HEAD") < 0)
		return NULL;
	if (git_reference_type(head) == GIT_REFERENCE_SYMBOLIC) {
		target = git_reference_symbolic_target(head);
		if (starts_with(target, "refs/heads/"))
			name = xstrdup(target + strlen("refs/heads/"));
	}
	git_reference_free(head);
	return name;
}

/* A detached worktree of `run --workers` names its experiment in
 * $GIT_DIR/autokernel/experiment (judge/workers.h). */
static char *detached_name(void)
{
	struct strbuf path = STRBUF_INIT, name = STRBUF_INIT;
	char *out = NULL;

	if (git_repository_head_detached(repo_need()) != 1)
		return NULL;
	strbuf_addf(&path, "%sautokernel/experiment", repo_gitdir());
	if (strbuf_read_file(&name, path.buf) > 0) {
		strbuf_trim(&name);
		if (name.len && !strchr(name.buf, '/'))
			out = strbuf_detach(&name, NULL);
	}
	strbuf_release(&path);
	strbuf_release(&name);
	return out;
}

char *repo_branch_name(void)
{
	char *b = repo_current_branch(), *name = NULL;

	if (b && starts_with(b, "autokernel/") && b[11])
		name = xstrdup(b + 11);
	else if (!b)
		name = detached_name();
	free(b);
	return name;
}

static git_config *snapshot(void)
{
	git_config *cfg = NULL, *snap = NULL;

	if (repo_get()) {
		if (git_repository_config(&cfg, repo) < 0)
			return NULL;
	} else if (git_config_open_default(&cfg) < 0) {
		return NULL;
	}
	git_config_snapshot(&snap, cfg);
	git_config_free(cfg);
	return snap;
}

/* One shell-quoted word of GIT_CONFIG_PARAMETERS ('a'\''b' is a'b), from
 * *p into w; 0, or -1 at the end or on a malformed word. */
static int sq_word(const char **p, struct strbuf *w)
{
	const char *s = *p;

	strbuf_reset(w);
	while (*s == ' ')
		s++;
	if (*s != '\'')
		return -1;
	for (;;) {
		const char *q = strchr(s + 1, '\'');

		if (!q)
			return -1;
		strbuf_add(w, s + 1, q - s - 1);
		s = q + 1;
		if (strncmp(s, "\\''", 3))
			break;
		strbuf_addch(w, '\'');
		s += 2;         /* the \' and the quote that reopens */
	}
	*p = s;
	return 0;
}

/*
 * `git -c key=value` reaches hooks and commands as GIT_CONFIG_PARAMETERS,
 * which libgit2 does not read: 'key'='value' words (or 'key=value' from
 * git before 2.31).  The last setting of key, or NULL; free() it.
 */
static char *config_from_params(const char *key)
{
	const char *p = getenv("GIT_CONFIG_PARAMETERS");
	struct strbuf w = STRBUF_INIT, k = STRBUF_INIT;
	char *val = NULL;

	while (p && sq_word(&p, &w) == 0) {
		const char *eq;

		strbuf_reset(&k);
		if (*p == '=') {
			strbuf_addbuf(&k, &w);
			p++;
			if (sq_word(&p, &w) < 0)
				break;
		} else if ((eq = strchr(w.buf, '='))) {
			strbuf_add(&k, w.buf, eq - w.buf);
			memmove(w.buf, eq + 1, strlen(eq + 1) + 1);
			w.len = strlen(w.buf);
		} else {
			strbuf_addbuf(&k, &w);
			strbuf_reset(&w);
			strbuf_addstr(&w, "true");      /* git -c flag */
		}
		if (!strcasecmp(k.buf, key)) {
			free(val);
			val = xstrdup(w.buf);
		}
	}
	strbuf_release(&w);
	strbuf_release(&k);
	return val;
}

char *config_string(const char *key, const char *def)
{
	git_config *cfg;
	const char *v = NULL;
	char *out = config_from_params(key);

	if (out)
		return out;
	cfg = snapshot();
	if (cfg && git_config_get_string(&v, cfg, key) == 0)
		out = xstrdup(v);
	else
		out = def ? xstrdup(def) : NULL;
	git_config_free(cfg);
	return out;
}

int config_int(const char *key, int def)
{
	char *s = config_string(key, NULL);
	int32_t v;
	int out = def;

	if (s && git_config_parse_int32(&v, s) == 0)
		out = v;
	free(s);
	return out;
}

int config_bool(const char *key, int def)
{
	char *s = config_string(key, NULL);
	int v, out = def;

	if (s && git_config_parse_bool(&v, s) == 0)
		out = v;
	free(s);
	return out;
}

double config_double(const char *key, double def)
{
	char *s = config_string(key, NULL), *end;
	double v = def;

	if (s) {
		v = strtod(s, &end);
		if (end == s)
			v = def;
		else if (*end == '%')
			v /= 100;
	}
	free(s);
	return v;
}

double config_fraction(const char *key, double def)
{
	char *s = config_string(key, NULL);
	double v = def;

	if (s && parse_fraction(s, &v) < 0) {
		warning("%s '%s' is not a percentage; using %g%%", key, s,
			def * 100);
		v = def;
	}
	free(s);
	return v;
}

double config_min_gain(void)
{
	return config_fraction("autokernel.minGain", 0.01);
}

double config_max_shape_regression(void)
{
	return config_fraction("autokernel.maxShapeRegression", 0);
}

int config_timeout_ms(void)
{
	const char *env = getenv("AUTOKERNEL_TIMEOUT");
	double s = config_double("autokernel.timeout", 30);

	if (env && atof(env) > 0)
		s = atof(env);
	return (int)(s * 1000);
}

int repo_first_parent(git_oid *out, const git_oid *commit)
{
	git_commit *c = NULL;
	int ret = 1;

	if (git_commit_lookup(&c, repo_need(), commit) < 0)
		return error("unable to read commit %s: %s",
			     git_oid_tostr_s(commit), repo_error());
	if (git_commit_parentcount(c)) {
		*out = *git_commit_parent_id(c, 0);
		ret = 0;
	}
	git_commit_free(c);
	return ret;
}

int repo_read_file(struct strbuf *out, const char *rev, const char *path)
{
	git_object *obj = NULL;
	git_tree *tree = NULL;
	git_tree_entry *entry = NULL;
	git_index *index = NULL;
	git_blob *blob = NULL;
	git_oid id;
	int ret = 0, e;

	if (!rev) {
		const git_index_entry *ie;

		if (git_repository_index(&index, repo_need()) < 0 ||
		    git_index_read(index, 0) < 0) {
			ret = error("unable to read the index: %s", repo_error());
			goto cleanup;
		}
		ie = git_index_get_bypath(index, path, 0);
		if (!ie) {
			ret = 1;
			goto cleanup;
		}
		id = ie->id;
	} else {
		if (git_revparse_single(&obj, repo_need(), rev) < 0) {
			ret = error("unknown revision '%s'", rev);
			goto cleanup;
		}
		if (git_object_peel((git_object **)&tree, obj, GIT_OBJECT_TREE) < 0) {
			ret = error("'%s' is not a commit or tree", rev);
			goto cleanup;
		}
		e = git_tree_entry_bypath(&entry, tree, path);
		if (e == GIT_ENOTFOUND) {
			ret = 1;
			goto cleanup;
		}
		if (e < 0) {
			ret = error("unable to read '%s:%s': %s", rev, path,
				    repo_error());
			goto cleanup;
		}
		id = *git_tree_entry_id(entry);
	}
	if (git_blob_lookup(&blob, repo, &id) < 0) {
		ret = error("unable to read '%s': %s", path, repo_error());
		goto cleanup;
	}
	strbuf_add(out, git_blob_rawcontent(blob), (size_t)git_blob_rawsize(blob));
cleanup:
	git_blob_free(blob);
	git_tree_entry_free(entry);
	git_tree_free(tree);
	git_object_free(obj);
	git_index_free(index);
	return ret;
}

int git_cmd(struct strbuf *out, int quiet, ...)
{
	struct child c = CHILD_INIT;
	const char *arg;
	va_list ap;
	int rc;

	strvec_push(&c.args, "git");
	va_start(ap, quiet);
	while ((arg = va_arg(ap, const char *)))
		strvec_push(&c.args, arg);
	va_end(ap);
	c.no_stdin = 1;
	c.timeout_ms = 10 * 60 * 1000;
	if (out || quiet)
		c.capture = 1;
	rc = run_child(&c);
	if (out)
		strbuf_add(out, c.out.buf, c.out.len);
	if (!quiet && c.err.len)
		fputs(c.err.buf, stderr);
	child_release(&c);
	return rc;
}
