/*
 * workers.c: the workers of `run --workers` in git (judge/workers.h).
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include "judge/slurm.h"
#include "judge/workers.h"
#include "lib/paths.h"
#include "lib/records.h"
#include "lib/repo.h"
#include "lib/result.h"

const char *pool_dir(void)
{
	static char dir[4300];

	if (!dir[0]) {
		snprintf(dir, sizeof(dir), "%s/workers", repo_shared_dir());
		if (mkdir_p(dir) < 0)
			die("cannot create '%s'", dir);
	}
	return dir;
}

void pool_worktree(struct strbuf *path, int n)
{
	strbuf_addf(path, "%s/%d", pool_dir(), n);
}

int pool_add_worktree(struct strbuf *path, int n, const char *rev)
{
	pool_worktree(path, n);
	if (git_cmd(NULL, 1, "worktree", "add", "-q", "--detach", "-f",
		    path->buf, rev, NULL))
		return error("unable to add the worktree '%s' of worker %d",
			     path->buf, n);
	return 0;
}

int pool_remove_worktree(int n)
{
	struct strbuf path = STRBUF_INIT;
	int rc;

	pool_worktree(&path, n);
	rc = git_cmd(NULL, 1, "worktree", "remove", "--force", "--force",
		     path.buf, NULL);
	if (rc && !access(path.buf, F_OK))
		remove_tree(path.buf);
	git_cmd(NULL, 1, "worktree", "prune", NULL);
	rc = access(path.buf, F_OK) ? 0 :
		error("unable to remove the worktree '%s'", path.buf);
	strbuf_release(&path);
	return rc;
}

static int all_digits(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (!isdigit((unsigned char)*s))
			return 0;
	return 1;
}

int pool_left(int *out, int n)
{
	DIR *d = opendir(pool_dir());
	struct dirent *e;
	int nr = 0;

	while (d && (e = readdir(d)) && nr < n)
		if (all_digits(e->d_name) && atoi(e->d_name) > 0)
			out[nr++] = atoi(e->d_name);
	if (d)
		closedir(d);
	return nr;
}

static void pool_path(struct strbuf *path, const char *what)
{
	strbuf_addf(path, "%s/%s", pool_dir(), what);
}

void pool_clear(void)
{
	struct strbuf path = STRBUF_INIT;

	pool_path(&path, "claims");
	remove_tree(path.buf);
	strbuf_reset(&path);
	pool_path(&path, "state.json");
	unlink(path.buf);
	strbuf_release(&path);
}

/* An exclusive flock of the pool's file what: the fd, or -1. */
static int pool_lock(const char *what)
{
	struct strbuf path = STRBUF_INIT;
	int fd;

	pool_path(&path, what);
	fd = open(path.buf, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		error_errno("unable to open '%s'", path.buf);
	while (fd >= 0 && flock(fd, LOCK_EX) < 0)
		if (errno != EINTR) {
			error_errno("unable to lock '%s'", path.buf);
			close(fd);
			fd = -1;
		}
	strbuf_release(&path);
	return fd;
}

/* The state, locked: {"tickets": N, "ops": {"<name>": {"streak": N,
 * "done": B}}}.  state_close() writes it back and unlocks. */
static json_t *state_open(int *fd)
{
	struct strbuf path = STRBUF_INIT;
	json_t *st;

	*fd = pool_lock("state.lock");
	pool_path(&path, "state.json");
	st = json_load_file(path.buf, 0, NULL);
	if (!json_is_object(st)) {
		json_decref(st);
		st = json_pack("{s:i,s:{}}", "tickets", 0, "ops");
	}
	strbuf_release(&path);
	return st;
}

static void state_close(int fd, json_t *st)
{
	struct strbuf path = STRBUF_INIT;
	char *text = json_dumps(st, JSON_COMPACT | JSON_SORT_KEYS);

	pool_path(&path, "state.json");
	if (text)
		write_file_atomic(path.buf, text, strlen(text));
	free(text);
	json_decref(st);
	if (fd >= 0)
		close(fd);
	strbuf_release(&path);
}

static json_t *state_op(json_t *st, const char *name)
{
	json_t *ops = json_object_get(st, "ops"), *op;

	if (!json_is_object(ops)) {
		ops = json_object();
		json_object_set_new(st, "ops", ops);
	}
	op = json_object_get(ops, name);
	if (!json_is_object(op)) {
		op = json_pack("{s:i,s:b}", "streak", 0, "done", 0);
		json_object_set_new(ops, name, op);
	}
	return op;
}

int pool_tickets(void)
{
	int fd;
	json_t *st = state_open(&fd);
	int n = (int)json_integer_value(json_object_get(st, "tickets"));

	json_decref(st);
	if (fd >= 0)
		close(fd);
	return n;
}

enum pool_go pool_next(struct pool *p, const char *name, int *ticket)
{
	int fd;
	json_t *st = state_open(&fd), *op = state_op(st, name);
	int tickets = (int)json_integer_value(json_object_get(st, "tickets"));
	enum pool_go go = POOL_GO;

	if (json_is_true(json_object_get(op, "done")))
		go = POOL_OP_DONE;
	else if (json_integer_value(json_object_get(op, "streak")) >=
		 p->plateau)
		go = POOL_PLATEAU;
	else if (p->max && tickets >= p->max)
		go = POOL_MAX;
	if (go == POOL_GO)
		json_object_set_new(st, "tickets", json_integer(++tickets));
	*ticket = tickets;
	state_close(fd, st);
	return go;
}

void pool_done(struct pool *p, const char *name, int rejected, int op_done)
{
	int fd;
	json_t *st = state_open(&fd), *op = state_op(st, name);
	json_int_t streak = json_integer_value(json_object_get(op, "streak"));

	(void)p;
	if (rejected >= 0)
		json_object_set_new(op, "streak",
				    json_integer(rejected ? streak + 1 : 0));
	if (op_done)
		json_object_set_new(op, "done", json_true());
	state_close(fd, st);
}

int pool_claim(void *data, const char *key)
{
	struct pool *p = data;
	struct strbuf path = STRBUF_INIT, text = STRBUF_INIT;
	git_oid id;
	int fd, ret = 0;

	strbuf_addf(&text, "%s\n%s\n", p->op ? p->op : "", key);
	git_odb_hash(&id, text.buf, text.len, GIT_OBJECT_BLOB);
	pool_path(&path, "claims");
	mkdir_p(path.buf);
	strbuf_addf(&path, "/%s", git_oid_tostr_s(&id));
	fd = open(path.buf, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd >= 0) {
		strbuf_addf(&text, "worker %d\n", p->id);
		if (write(fd, text.buf, text.len) < 0)
			warning("unable to write the claim '%s'", path.buf);
		close(fd);
	} else if (errno == EEXIST) {
		ret = 1;
	} else {
		warning("unable to claim '%s' (%s): going on unclaimed", key,
			strerror(errno));
	}
	strbuf_release(&path);
	strbuf_release(&text);
	return ret;
}

int pool_sync(const char *name)
{
	struct strbuf path = STRBUF_INIT, ref = STRBUF_INIT;
	int ret = 0;

	strbuf_addf(&path, "%s/experiment", repo_autokernel_dir());
	strbuf_addf(&ref, "refs/heads/autokernel/%s", name);
	if (write_file_atomic(path.buf, name, strlen(name)) < 0 ||
	    git_cmd(NULL, 1, "reset", "-q", "--hard", ref.buf, NULL))
		ret = error("unable to bring the worktree to '%s'", ref.buf);
	strbuf_release(&path);
	strbuf_release(&ref);
	return ret;
}

/*
 * The serialized step: under the pool's lock, the branch moves from the
 * commit cand was judged against (its parent) to cand, by a
 * compare-and-swap, so that no writer outside the pool is overwritten
 * either.  0 landed, 1 the tip has moved (into *tip), -1 error.
 */
static int land(const char *name, const git_oid *cand, git_oid *tip)
{
	git_repository *repo = repo_need();
	git_reference *r = NULL;
	struct strbuf ref = STRBUF_INIT, msg = STRBUF_INIT;
	git_oid parent;
	int fd = pool_lock("land.lock"), e, ret = 1;

	strbuf_addf(&ref, "refs/heads/autokernel/%s", name);
	strbuf_addf(&msg, "autokernel: kept by a worker (%.7s)",
		    git_oid_tostr_s(cand));
	if (fd < 0 || git_reference_name_to_id(tip, repo, ref.buf) < 0 ||
	    repo_first_parent(&parent, cand)) {
		ret = error("unable to land %s on '%s': %s",
			    git_oid_tostr_s(cand), ref.buf, repo_error());
		goto cleanup;
	}
	if (!git_oid_equal(tip, &parent))
		goto cleanup;
	e = git_reference_create_matching(&r, repo, ref.buf, cand, 1, tip,
					  msg.buf);
	if (e == 0) {
		*tip = *cand;
		ret = 0;
	} else if (e != GIT_EMODIFIED) {
		ret = error("unable to move '%s': %s", ref.buf, repo_error());
	} else if (git_reference_name_to_id(tip, repo, ref.buf) < 0) {
		ret = -1;
	}
cleanup:
	git_reference_free(r);
	if (fd >= 0)
		close(fd);
	strbuf_release(&ref);
	strbuf_release(&msg);
	return ret;
}

/* The candidate's kernel put on the new tip: 0, 1 when the tip has the
 * same kernel already, -1 error. */
static int reapply(const struct loop_commit *lc, const git_oid *cand,
		   const git_oid *tip)
{
	struct strbuf text = STRBUF_INIT, path = STRBUF_INIT;
	char hex[GIT_OID_HEXSZ + 1];
	int ret = -1;

	git_oid_tostr(hex, sizeof(hex), cand);
	if (repo_read_file(&text, hex, lc->kernel))
		goto cleanup;
	git_oid_tostr(hex, sizeof(hex), tip);
	if (git_cmd(NULL, 1, "reset", "-q", "--hard", hex, NULL)) {
		error("unable to reset the worktree to %s", hex);
		goto cleanup;
	}
	strbuf_addf(&path, "%s%s", repo_workdir(), lc->kernel);
	if (write_file_atomic(path.buf, text.buf, text.len) == 0)
		ret = loop_kernel_changed(lc->kernel) ? 0 : 1;
cleanup:
	strbuf_release(&text);
	strbuf_release(&path);
	return ret;
}

int pool_keep(struct loop_commit *lc)
{
	char was[GIT_OID_HEXSZ + 1];
	git_oid cand, tip;
	int rc;

	for (;;) {
		if (repo_head(&cand))
			return -1;
		rc = land(lc->name, &cand, &tip);
		if (rc <= 0)
			return rc;
		/* judged against a best that has since moved: again, on
		 * the new best, before it can be kept */
		git_oid_tostr(was, sizeof(was), &cand);
		fprintf(stderr, "autokernel: the branch moved to %.7s while "
			"%.7s was judged: judging it again against the new "
			"best\n", git_oid_tostr_s(&tip), was);
		rc = reapply(lc, &cand, &tip);
		if (rc)
			return rc < 0 ? -1 : 2;
		rc = loop_commit(lc);
		if (rc)
			return rc;
	}
}

/* A git command of the worker that died may still be running here (its
 * own process group outlives the worker): until its index.lock goes. */
static void wait_for_git(void)
{
	struct strbuf path = STRBUF_INIT;
	int i;

	strbuf_addf(&path, "%sindex.lock", repo_gitdir());
	for (i = 0; i < 6000 && !access(path.buf, F_OK); i++)
		usleep(100000);
	if (i == 6000) {
		warning("removing '%s', ten minutes old", path.buf);
		unlink(path.buf);
	}
	strbuf_release(&path);
}

/* A candidate in the work tree whose judgement never finished: saved as
 * an unjudged attempt unless the hooks recorded it. */
static void save_interrupted(const char *name)
{
	struct strbuf msg = STRBUF_INIT, path = STRBUF_INIT;

	if (loop_tree_is_clean())
		return;
	strbuf_addf(&path, "%s/run-message", repo_autokernel_dir());
	if (strbuf_read_file(&msg, path.buf) <= 0)
		strbuf_addstr(&msg, "(no hypothesis)");
	strbuf_trim(&msg);
	if (loop_save_unjudged(name, msg.buf, "interrupted", "the worker "
			       "stopped before the judgement finished") == 0)
		fprintf(stderr, "autokernel: a candidate whose judgement did "
			"not finish is saved as an attempt\n");
	strbuf_release(&msg);
	strbuf_release(&path);
}

/* A kept commit on this worktree's HEAD that never reached the branch. */
static int land_left(struct pool *p, const char *name)
{
	struct loop_commit lc = LOOP_COMMIT_INIT;
	git_commit *c = NULL;
	git_oid head, tip;
	struct strbuf ref = STRBUF_INIT;
	struct result r = RESULT_INIT;
	json_t *note = NULL;
	int ret = 0;

	strbuf_addf(&ref, "refs/heads/autokernel/%s", name);
	if (repo_head(&head) ||
	    git_reference_name_to_id(&tip, repo_need(), ref.buf) < 0 ||
	    git_oid_equal(&head, &tip) ||
	    git_graph_descendant_of(repo_need(), &tip, &head) == 1)
		goto cleanup;
	loop_repair_head();
	note = note_read(&head);
	result_from_note(&r, note);
	if (r.keep != 1 || git_commit_lookup(&c, repo_need(), &head) < 0)
		goto cleanup;   /* unverified: --no-verify, not ours */
	fprintf(stderr, "autokernel: landing %.7s, kept by a worker that "
		"stopped before it landed\n", git_oid_tostr_s(&head));
	lc.name = name;
	lc.kernel = r.kernel_path;
	lc.message = git_commit_message(c);
	lc.slurm = p->slurm;
	strvec_push(&lc.env, "AUTOKERNEL_RUN=1");
	if (lc.kernel && pool_keep(&lc) < 0)
		ret = -1;
cleanup:
	loop_commit_release(&lc);
	git_commit_free(c);
	result_release(&r);
	json_decref(note);
	strbuf_release(&ref);
	return ret;
}

int pool_recover(struct pool *p)
{
	char *name;
	int ret;

	wait_for_git();
	slurm_cancel_left();
	if (!(name = repo_branch_name()))
		return 0;
	save_interrupted(name);
	git_cmd(NULL, 1, "reset", "-q", "--hard", NULL);
	git_cmd(NULL, 1, "clean", "-q", "-f", "-d", NULL);
	ret = land_left(p, name);
	git_cmd(NULL, 1, "reset", "-q", "--hard", NULL);
	free(name);
	return ret;
}
