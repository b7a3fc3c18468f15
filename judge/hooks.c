/*
 * hooks.c: what the installed hooks do on autokernel/ branches
 * (judge/hooks.h); `git autokernel hook` is only their entry point.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "judge/hooks.h"
#include "ops/dtype.h"
#include "judge/staged.h"
#include "judge/judge.h"
#include "lib/paths.h"
#include "lib/records.h"
#include "lib/repo.h"
#include "lib/result.h"

/* The staged tree and HEAD of the commit being made. */
struct staged {
	char *name;
	git_oid tree, head;
	int unborn;
	struct strbuf key;
};

static int staged_load(struct staged *s)
{
	git_index *index = NULL;
	int r;

	memset(s, 0, sizeof(*s));
	strbuf_init(&s->key, 0);
	if (!(s->name = repo_branch_name()))
		return 1;
	if (repo_hook_index(&index) < 0)
		return -1;
	if (git_index_write_tree(&s->tree, index) < 0) {
		git_index_free(index);
		return error("unable to write the staged tree: %s", repo_error());
	}
	git_index_free(index);
	r = repo_head(&s->head);
	if (r < 0)
		return -1;
	s->unborn = r == 1;
	pending_key(&s->key, &s->tree, s->unborn ? NULL : &s->head);
	return 0;
}

static void staged_release(struct staged *s)
{
	free(s->name);
	strbuf_release(&s->key);
}

/* Whether AUTOKERNEL_REJUDGE or autokernel.rejudge asks to measure a
 * tree that was judged before again. */
static int rejudge_asked(void)
{
	const char *env = getenv("AUTOKERNEL_REJUDGE");

	if (env && *env)
		return strcmp(env, "0") && strcmp(env, "false");
	return config_bool("autokernel.rejudge", 0);
}

/* A pending result's time as "2026-12-03 09:14:02" into buf. */
static void judged_when(const char *key, char *buf, size_t n)
{
	time_t t = (time_t)pending_time(key);
	struct tm tm;

	if (t > 0 && localtime_r(&t, &tm))
		strftime(buf, n, "%Y-%m-%d %H:%M:%S", &tm);
	else
		snprintf(buf, n, "an earlier commit");
}

/* The verdict of a tree judged against this HEAD before; 1 when there is
 * one (and it stands), 0 when the tree is to be judged. */
static int cached_verdict(struct staged *s)
{
	json_t *res = pending_load(s->key.buf);
	struct result r;
	char when[64];

	if (!res)
		return 0;
	if (rejudge_asked()) {
		fprintf(stderr, "autokernel: judging again a tree judged "
			"before (autokernel.rejudge)\n");
		pending_remove(s->key.buf);
		json_decref(res);
		return 0;
	}
	result_from_note(&r, res);
	json_decref(res);
	if (r.judged_by) {
		/* run --slurm: the job's judgement, recorded here */
		fprintf(stderr, "autokernel: judged by %s: %s\n", r.judged_by,
			r.verdict);
		result_release(&r);
		return 1;
	}
	judged_when(s->key.buf, when, sizeof(when));
	fprintf(stderr, "autokernel: this staged tree was judged against this "
		"HEAD before (cached verdict from %s): %s\n"
		"autokernel: 'git -c autokernel.rejudge=true commit ...' or "
		"AUTOKERNEL_REJUDGE=1 measures it again\n", when, r.verdict);
	result_release(&r);
	return 1;
}

/* What an amend of an unverified HEAD goes through with. */
static json_t *unverified_result(void)
{
	struct result r = RESULT_INIT;

	r.keep = 1;
	r.status = "unverified";
	r.verdict = "HEAD is unverified";
	return result_to_note(&r);
}

/*
 * A staged tree that is HEAD's changes nothing to judge: an amend that
 * only rewords (or an empty commit).  It goes through with HEAD's result,
 * so the message keeps its trailers; its note is HEAD's, copied by git
 * on an amend (notes.rewriteRef), and not written again by post-commit.
 */
static int same_as_head(struct staged *s)
{
	git_commit *head = NULL;
	json_t *res;
	int same;

	if (s->unborn || git_commit_lookup(&head, repo_need(), &s->head) < 0)
		return 0;
	same = git_oid_equal(git_commit_tree_id(head), &s->tree);
	git_commit_free(head);
	if (!same)
		return 0;
	res = note_read(&s->head);
	if (!res)
		res = unverified_result();
	json_object_set_new(res, "reworded", json_true());
	fprintf(stderr, "autokernel: the staged tree is HEAD's: nothing to "
		"judge; the commit keeps HEAD's result\n");
	pending_save(s->key.buf, res);
	json_decref(res);
	return 1;
}

int hook_pre_commit(void)
{
	struct staged s;
	json_t *res;
	int r = staged_load(&s), ret = 0;

	if (r) {
		staged_release(&s);
		return r > 0 ? 0 : 1;
	}
	if (cached_verdict(&s) || same_as_head(&s))
		goto done;
	r = experiment_judge(&res, s.name, &s.tree, s.unborn ? NULL : &s.head,
			     stderr);
	if (r < 0) {
		ret = 1;        /* refused or no device: nothing to record */
		goto done;
	}
	if (pending_save(s.key.buf, res) < 0)
		ret = 1;
	json_decref(res);
done:
	staged_release(&s);
	return ret;
}

/* The index entry of path back to HEAD's blob, in the index the hook was
 * given.  0, or -1 when it cannot be done. */
static int reset_index_entry(git_index *index, const char *path)
{
	git_object *head = NULL;
	git_tree *tree = NULL;
	git_tree_entry *te = NULL;
	git_index_entry e;
	int ret = -1;

	if (git_revparse_single(&head, repo_need(), "HEAD") < 0 ||
	    git_object_peel((git_object **)&tree, head, GIT_OBJECT_TREE) < 0 ||
	    git_tree_entry_bypath(&te, tree, path) < 0)
		goto cleanup;
	memset(&e, 0, sizeof(e));
	e.path = path;
	e.mode = git_tree_entry_filemode(te);
	e.id = *git_tree_entry_id(te);
	if (git_index_add(index, &e) == 0 && git_index_write(index) == 0)
		ret = 0;
cleanup:
	git_tree_entry_free(te);
	git_tree_free(tree);
	git_object_free(head);
	return ret;
}

/*
 * Whether the work tree's copy of path is the blob id (the judged one),
 * after git's filters.  A file that is missing or unreadable differs.
 */
static int worktree_is(const char *path, const git_oid *id)
{
	struct strbuf abs = STRBUF_INIT;
	git_oid wt;
	int same;

	strbuf_addf(&abs, "%s%s", repo_workdir(), path);
	same = git_repository_hashfile(&wt, repo_need(), abs.buf,
				       GIT_OBJECT_BLOB, path) == 0 &&
		git_oid_equal(&wt, id);
	strbuf_release(&abs);
	return same;
}

/*
 * Saves the work tree's copy of path, which holds changes that were never
 * staged, as a commit beside attempt n (its tree the attempt's with that
 * one file replaced, its parent the attempt) under <attempt>-worktree, so
 * that nothing the user wrote depends on the work tree alone.
 */
static int save_worktree_copy(struct strbuf *ref, const char *name, int n,
			      const char *path)
{
	git_repository *repo = repo_need();
	git_oid blob, tree, id;
	git_commit *attempt = NULL;
	git_tree *base = NULL;
	git_tree *out = NULL;
	git_index *index = NULL;
	git_index_entry e;
	git_signature *sig = NULL;
	git_reference *r = NULL;
	struct strbuf msg = STRBUF_INIT, aref = STRBUF_INIT;
	int ret = -1;

	strbuf_addf(&aref, "%s%s/%d", ATTEMPTS_PREFIX, name, n);
	strbuf_addf(ref, "%s-worktree", aref.buf);
	memset(&e, 0, sizeof(e));
	/* an in-memory index of the attempt's tree, the file replaced */
	if (git_reference_name_to_id(&id, repo, aref.buf) < 0 ||
	    git_commit_lookup(&attempt, repo, &id) < 0 ||
	    git_commit_tree(&base, attempt) < 0 ||
	    git_blob_create_from_workdir(&blob, repo, path) < 0 ||
	    git_index_new(&index) < 0 ||
	    git_index_read_tree(index, base) < 0)
		goto cleanup;
	e.path = path;
	e.mode = GIT_FILEMODE_BLOB;
	e.id = blob;
	if (git_index_add(index, &e) < 0 ||
	    git_index_write_tree_to(&tree, index, repo) < 0 ||
	    git_tree_lookup(&out, repo, &tree) < 0 ||
	    (git_signature_default(&sig, repo) < 0 &&
	     git_signature_now(&sig, "git-autokernel",
			       "autokernel@localhost") < 0))
		goto cleanup;
	strbuf_addf(&msg, "work tree of attempt %d: '%s' with changes that "
		    "were not staged\n", n, path);
	if (git_commit_create(&id, repo, NULL, sig, sig, NULL, msg.buf, out,
			      1, (const git_commit **)&attempt) < 0 ||
	    git_reference_create(&r, repo, ref->buf, &id, 1,
				 "autokernel: unstaged work tree copy") < 0)
		goto cleanup;
	ret = 0;
cleanup:
	if (ret)
		error("unable to save the work tree's '%s': %s", path,
		      repo_error());
	git_tree_free(out);
	git_reference_free(r);
	git_signature_free(sig);
	git_index_free(index);
	git_tree_free(base);
	git_commit_free(attempt);
	strbuf_release(&msg);
	strbuf_release(&aref);
	return ret;
}

/*
 * Restores the kernel to HEAD's in the index and, where that loses
 * nothing, in the work tree.  For a plain `git commit` the hook's index
 * is the real one, unlocked, and is reset here; for `commit -a` or
 * `commit <paths>` git hands the hook a locked copy that it rolls back
 * itself when the commit is refused.  A work tree copy that is not the
 * judged one holds changes that were never staged: it is saved beside
 * the attempt and left where it is, as git would leave it.
 */
static void reset_kernel(struct staged *s, const char *kernel, int n)
{
	const char *file = getenv("GIT_INDEX_FILE");
	struct strbuf text = STRBUF_INIT, path = STRBUF_INIT, ref = STRBUF_INIT;
	git_index *index = NULL;
	git_tree *tree = NULL;
	git_tree_entry *te = NULL;
	int keep_worktree = 0;

	if (!kernel || repo_read_file(&text, "HEAD", kernel))
		goto cleanup;
	if (git_tree_lookup(&tree, repo_need(), &s->tree) == 0 &&
	    git_tree_entry_bypath(&te, tree, kernel) == 0 &&
	    !worktree_is(kernel, git_tree_entry_id(te))) {
		keep_worktree = 1;
		strbuf_addf(&path, "%s%s", repo_workdir(), kernel);
		if (access(path.buf, F_OK) == 0 &&
		    save_worktree_copy(&ref, s->name, n, kernel) == 0)
			fprintf(stderr, "autokernel: '%s' has changes that "
				"were not staged: left in the work tree, and "
				"saved as %s\n", kernel, ref.buf);
		else
			fprintf(stderr, "autokernel: '%s' in the work tree is "
				"not the judged copy: left as it is\n", kernel);
	}
	if (!keep_worktree) {
		strbuf_reset(&path);
		strbuf_addf(&path, "%s%s", repo_workdir(), kernel);
		write_file_atomic(path.buf, text.buf, text.len);
	}
	/* with a lock, read the real index, not the locked copy the
	 * repository was handed by repo_hook_index(): git rolls back only
	 * the copy */
	strbuf_reset(&path);
	strbuf_addf(&path, "%sindex", repo_gitdir());
	if (!file || !ends_with(file, ".lock")) {
		if (repo_hook_index(&index) == 0 &&
		    reset_index_entry(index, kernel) < 0)
			warning("unable to reset '%s' in the index: %s", kernel,
				repo_error());
	} else if (git_index_open(&index, path.buf) == 0) {
		const git_index_entry *e = git_index_get_bypath(index, kernel, 0);
		git_oid id;

		if (e && !git_odb_hash(&id, text.buf, text.len, GIT_OBJECT_BLOB) &&
		    !git_oid_equal(&id, &e->id))
			fprintf(stderr, "autokernel: '%s' is still staged; 'git "
				"reset -- %s' unstages it\n", kernel, kernel);
	}
cleanup:
	git_tree_entry_free(te);
	git_tree_free(tree);
	git_index_free(index);
	strbuf_release(&text);
	strbuf_release(&path);
	strbuf_release(&ref);
}

/* res: the pending result, r: it read */
static int hook_reject(struct staged *s, json_t *res, const struct result *r,
		       struct strbuf *msg)
{
	struct strbuf am = STRBUF_INIT;
	const char *verdict = r->verdict;
	git_oid id;
	int n = 0;

	if (r->attempt > 0) {
		n = r->attempt;
	} else {
		experiment_attempt_message(&am, msg->buf, r);
		if (attempt_save(&n, &id, s->name, &s->tree,
				 s->unborn ? NULL : &s->head, am.buf, res) < 0) {
			strbuf_release(&am);
			return 1;
		}
		json_object_set_new(res, "attempt", json_integer(n));
		pending_save(s->key.buf, res);
	}
	fprintf(stderr, "autokernel: rejected: %.*s\n"
		"autokernel: the candidate is saved as %s%s/%d "
		"('git autokernel log --attempts')\n",
		verdict ? (int)strcspn(verdict, "\n") : 0, verdict ? verdict : "",
		ATTEMPTS_PREFIX, s->name, n);
	if (config_bool("autokernel.resetOnFail", 1)) {
		reset_kernel(s, r->kernel_path, n);
		fprintf(stderr, "autokernel: the kernel is reset to HEAD's "
			"(autokernel.resetOnFail)\n");
	}
	strbuf_release(&am);
	return 1;
}

/*
 * A merge commit (git runs commit-msg, not pre-commit, for it): one that
 * leaves the experiment's directory as HEAD has it goes through unjudged;
 * one that changes the kernel or problem.json is refused, since a merge
 * is no candidate.  0 or 1.
 */
static int hook_merge(struct staged *s)
{
	git_commit *head = NULL;
	git_tree *ht = NULL, *st = NULL;
	git_tree_entry *a = NULL, *b = NULL;
	int same;

	if (git_commit_lookup(&head, repo_need(), &s->head) < 0 ||
	    git_commit_tree(&ht, head) < 0 ||
	    git_tree_lookup(&st, repo_need(), &s->tree) < 0) {
		git_commit_free(head);
		error("unable to read the merge: %s", repo_error());
		return 1;
	}
	same = git_tree_entry_bypath(&a, ht, s->name) == 0 &&
		git_tree_entry_bypath(&b, st, s->name) == 0 &&
		git_oid_equal(git_tree_entry_id(a), git_tree_entry_id(b));
	git_tree_entry_free(a);
	git_tree_entry_free(b);
	git_tree_free(ht);
	git_tree_free(st);
	git_commit_free(head);
	if (same) {
		fprintf(stderr, "autokernel: a merge that leaves '%s/' as HEAD "
			"has it: not judged\n", s->name);
		return 0;
	}
	error("a merge that changes '%s/' is no candidate: keep the branch's "
	      "copy ('git checkout HEAD -- %s/'), commit the merge, then "
	      "commit the kernel change on its own to have it judged",
	      s->name, s->name);
	return 1;
}

int hook_commit_msg(const char *file)
{
	struct staged s;
	struct strbuf msg = STRBUF_INIT;
	struct result judged = RESULT_INIT;
	json_t *res = NULL;
	int r = staged_load(&s), ret = 0;

	if (r) {
		staged_release(&s);
		return r > 0 ? 0 : 1;
	}
	if (git_repository_state(repo_need()) == GIT_REPOSITORY_STATE_MERGE) {
		ret = hook_merge(&s);
		goto cleanup;
	}
	if (!(res = pending_load(s.key.buf))) {
		error("no verification result for the staged tree (was the "
		      "pre-commit hook skipped? 'git commit --no-verify' skips "
		      "both)");
		ret = 1;
		goto cleanup;
	}
	if (strbuf_read_file(&msg, file) < 0) {
		error_errno("unable to read '%s'", file);
		ret = 1;
		goto cleanup;
	}
	message_cleanup(&msg);
	result_from_note(&judged, res);
	if (judged.keep != 1) {
		ret = hook_reject(&s, res, &judged, &msg);
		goto cleanup;
	}
	/* post-commit writes only what this hook let through: a commit made
	 * with --no-verify skips this hook and stays unverified */
	json_object_set_new(res, "approved", json_true());
	if (pending_save(s.key.buf, res) < 0) {
		ret = 1;
		goto cleanup;
	}
	if (!judged.status || strcmp(judged.status, "unverified"))
		experiment_kept_message(&msg, &judged);
	if (write_file_atomic(file, msg.buf, msg.len) < 0)
		ret = 1;
cleanup:
	result_release(&judged);
	json_decref(res);
	strbuf_release(&msg);
	staged_release(&s);
	return ret;
}

int hook_note_commit(const git_oid *id)
{
	git_commit *commit = NULL;
	struct strbuf key = STRBUF_INIT;
	struct result judged = RESULT_INIT;
	json_t *res = NULL;
	int ret = 0;

	if (git_commit_lookup(&commit, repo_need(), id) < 0)
		goto cleanup;
	pending_key(&key, git_commit_tree_id(commit),
		    git_commit_parentcount(commit) ?
		    git_commit_parent_id(commit, 0) : NULL);
	if (!(res = pending_load(key.buf)))
		goto cleanup;   /* --no-verify: the commit stays unverified */
	result_from_note(&judged, res);
	if (!judged.approved || judged.reworded) {
		/* a tree judged before, committed with --no-verify; or HEAD's
		 * tree again, whose note git copies on an amend */
		goto cleanup;
	}
	json_object_del(res, "approved");
	json_object_set_new(res, "commit", json_string(git_oid_tostr_s(id)));
	if (note_write(id, res) == 0) {
		pending_remove(key.buf);
		ret = 1;
	} else {
		ret = -1;
	}
cleanup:
	result_release(&judged);
	json_decref(res);
	git_commit_free(commit);
	strbuf_release(&key);
	return ret;
}

int hook_post_commit(void)
{
	char *name = repo_branch_name();
	git_oid head;
	int ret = 0;

	if (name && !repo_head(&head))
		ret = hook_note_commit(&head) < 0;
	free(name);
	return ret;
}
