/*
 * loop.c: the experiment loop's mechanics (judge/loop.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "judge/hooks.h"
#include "judge/loop.h"
#include "judge/slurm.h"
#include "lib/paths.h"
#include "lib/records.h"
#include "lib/repo.h"
#include "lib/result.h"
#include "lib/run.h"

int loop_tree_is_clean(void)
{
	struct strbuf out = STRBUF_INIT;
	int clean = !git_cmd(&out, 0, "status", "--porcelain",
			     "--untracked-files=no", NULL) && !out.len;

	strbuf_release(&out);
	return clean;
}

void loop_untracked(struct strbuf *out)
{
	git_cmd(out, 1, "ls-files", "--others", "--exclude-standard", NULL);
}

/* Untracked paths that are not in before (a "\n"-framed list), one per
 * line: what the agent created. */
static void new_untracked(struct strbuf *out, const char *before)
{
	struct strbuf now = STRBUF_INIT, line = STRBUF_INIT;
	const char *p;

	loop_untracked(&now);
	for (p = now.buf; *p;) {
		const char *eol = strchrnul(p, '\n');

		strbuf_reset(&line);
		strbuf_addch(&line, '\n');
		strbuf_add(&line, p, eol - p);
		strbuf_addch(&line, '\n');
		if (eol > p && !strstr(before, line.buf))
			strbuf_add(out, line.buf + 1, line.len - 1);
		p = *eol ? eol + 1 : eol;
	}
	strbuf_release(&now);
	strbuf_release(&line);
}

/* Back to HEAD: the index, the tracked files the agent changed (the
 * kernel among them), and the untracked files it created. */
void loop_restore_tree(const char *before_untracked)
{
	struct strbuf created = STRBUF_INIT, abs = STRBUF_INIT;
	const char *p;

	git_cmd(NULL, 1, "reset", "-q", NULL);
	git_cmd(NULL, 1, "checkout", "-q", "HEAD", "--", ".", NULL);
	new_untracked(&created, before_untracked);
	for (p = created.buf; *p;) {
		const char *eol = strchrnul(p, '\n');

		strbuf_reset(&abs);
		strbuf_addstr(&abs, repo_workdir());
		strbuf_add(&abs, p, eol - p);
		remove_tree(abs.buf);
		p = *eol ? eol + 1 : eol;
	}
	strbuf_release(&created);
	strbuf_release(&abs);
}

/* Paths the agent changed besides the kernel: tracked changes and new
 * untracked files, comma-separated into bad. */
void loop_out_of_scope(struct strbuf *bad, const char *kernel,
			 const char *before_untracked)
{
	struct strbuf paths = STRBUF_INIT;
	const char *p;

	git_cmd(&paths, 1, "diff", "--name-only", "HEAD", NULL);
	new_untracked(&paths, before_untracked);
	for (p = paths.buf; *p;) {
		const char *eol = strchrnul(p, '\n');
		size_t len = eol - p;

		if (len && !(len == strlen(kernel) && !strncmp(p, kernel, len))) {
			if (bad->len)
				strbuf_addstr(bad, ", ");
			strbuf_add(bad, p, len);
		}
		p = *eol ? eol + 1 : eol;
	}
	strbuf_release(&paths);
}

int loop_kernel_changed(const char *kernel)
{
	return git_cmd(NULL, 1, "diff", "--quiet", "HEAD", "--", kernel, NULL) != 0;
}

/* Saves the work tree's candidate as an attempt without the hooks, for
 * experiments that never reached a commit (the agent failed after
 * editing, or edited other files). */
int loop_save_unjudged(const char *name, const char *subject,
			 const char *reason, const char *verdict)
{
	git_index *index = NULL;
	git_oid tree, head;
	json_t *note;
	struct strbuf msg = STRBUF_INIT;
	int n = 0, ret = 0;

	if (git_cmd(NULL, 1, "add", "-A", "--", ".", NULL) ||
	    git_repository_index(&index, repo_need()) < 0 ||
	    git_index_read(index, 1) < 0 ||
	    git_index_write_tree(&tree, index) < 0 || repo_head(&head)) {
		git_index_free(index);
		return error("unable to save the candidate: %s", repo_error());
	}
	note = json_pack("{s:i,s:s,s:b,s:s,s:s,s:s,s:s}", "version", 1,
			 "tool", AK_VERSION, "keep", 0, "status", "rejected",
			 "reason", reason, "verdict", verdict, "name", name);
	strbuf_addf(&msg, "%s\n\nRejected (%s): %s\n\nAutokernel-Verdict: "
		    "rejected\n", subject, reason, verdict);
	ret = attempt_save(&n, &tree, name, &tree, &head, msg.buf, note);
	json_decref(note);
	git_index_free(index);
	strbuf_release(&msg);
	return ret;
}

int loop_count_attempts(const char *name)
{
	struct attempt *a = NULL;
	int n = attempts_list(&a, name);

	free(a);
	return n;
}

/* The pending key of the staged tree against HEAD (records.h). */
static void staged_key(struct strbuf *key)
{
	git_index *index = NULL;
	git_oid tree, head;

	if (git_repository_index(&index, repo_need()) == 0 &&
	    git_index_read(index, 1) == 0 &&
	    git_index_write_tree(&tree, index) == 0 && !repo_head(&head))
		pending_key(key, &tree, &head);
	git_index_free(index);
}

/* Whether a candidate has a rejection on record: one judged before is
 * rejected again from the record, with no new attempt. */
static int rejected_on_record(const char *key)
{
	json_t *res = *key ? pending_load(key) : NULL;
	struct result r;
	int rejected;

	result_from_note(&r, res);
	rejected = r.keep == 0;
	result_release(&r);
	json_decref(res);
	return rejected;
}

/* Passes the phase the hooks wrote to the caller's tick. */
static void read_phase(void *data)
{
	struct loop_commit *lc = data;
	struct strbuf ph = STRBUF_INIT;

	if (strbuf_read_file(&ph, lc->phase_path.buf) > 0)
		lc->tick(ph.buf, lc->tick_data);
	strbuf_release(&ph);
}

/* The staged candidate as a commit on HEAD, the input of a Slurm job,
 * under refs/autokernel/jobs/<name>/<pid> while the job runs. */
static int job_commit(git_oid *out, struct strbuf *ref,
		      const struct loop_commit *lc)
{
	git_repository *repo = repo_need();
	git_index *index = NULL;
	git_tree *tree = NULL;
	git_commit *head = NULL;
	git_signature *sig = NULL;
	git_reference *r = NULL;
	git_oid tid, hid;
	int ret = -1;

	strbuf_addf(ref, "refs/autokernel/jobs/%s/%d", lc->name, (int)getpid());
	if (git_repository_index(&index, repo) < 0 ||
	    git_index_read(index, 1) < 0 ||
	    git_index_write_tree(&tid, index) < 0 || repo_head(&hid) ||
	    git_tree_lookup(&tree, repo, &tid) < 0 ||
	    git_commit_lookup(&head, repo, &hid) < 0 ||
	    (git_signature_default(&sig, repo) < 0 &&
	     git_signature_now(&sig, "git-autokernel",
			       "autokernel@localhost") < 0) ||
	    git_commit_create(out, repo, NULL, sig, sig, NULL, lc->message,
			      tree, 1, (const git_commit **)&head) < 0 ||
	    git_reference_create(&r, repo, ref->buf, out, 1,
				 "autokernel: judged by a Slurm job") < 0)
		error("unable to make the job's commit: %s", repo_error());
	else
		ret = 0;
	git_reference_free(r);
	git_signature_free(sig);
	git_commit_free(head);
	git_tree_free(tree);
	git_index_free(index);
	return ret;
}

/* Judges the staged candidate by a Slurm job and saves the verdict as
 * the pending result the hooks will find: 0; 1 the job gave none (saved
 * as an unjudged attempt); -1 no job, or the run was stopped. */
static int judge_by_job(struct loop_commit *lc, const char *key)
{
	struct strbuf ref = STRBUF_INIT, why = STRBUF_INIT;
	json_t *res = NULL;
	git_reference *r = NULL;
	git_oid id;
	int rc = -1;

	if (job_commit(&id, &ref, lc) == 0)
		rc = slurm_judge(&res, lc->slurm, lc->name, &id, &lc->env,
				 &why);
	if (git_reference_lookup(&r, repo_need(), ref.buf) == 0)
		git_reference_delete(r);
	git_reference_free(r);
	if (rc == 0 && pending_save(key, res) < 0)
		rc = -1;
	if (rc == 1 && run_interrupted)
		rc = -1;
	if (rc == 1) {
		loop_save_unjudged(lc->name, lc->message, "job", why.buf);
		lc->result = json_pack("{s:b,s:s,s:s}", "keep", 0, "reason",
				       "job", "verdict", why.buf);
	}
	json_decref(res);
	strbuf_release(&ref);
	strbuf_release(&why);
	return rc;
}

/* What the commit decided: the kept commit's note, or the rejection. */
static json_t *commit_result(int rc, const char *key)
{
	git_oid head;
	json_t *res = NULL;

	if (rc == 0 && !repo_head(&head))
		res = note_read(&head);
	if (!res && *key)
		res = pending_load(key);
	return res;
}

int loop_commit(struct loop_commit *lc)
{
	const char *name = lc->name, *kernel = lc->kernel;
	struct child c = CHILD_INIT;
	struct strbuf msgfile = STRBUF_INIT, log = STRBUF_INIT, key = STRBUF_INIT;
	int before = loop_count_attempts(name), rc;

	json_decref(lc->result);
	lc->result = NULL;
	strbuf_addf(&msgfile, "%s/run-message", repo_autokernel_dir());
	strbuf_addf(&log, "%s/run-commit.log", repo_autokernel_dir());
	write_file_atomic(msgfile.buf, lc->message, strlen(lc->message));
	if (git_cmd(NULL, 0, "add", "--", kernel, NULL)) {
		strbuf_release(&msgfile);
		strbuf_release(&log);
		return -1;
	}
	staged_key(&key);
	if (lc->slurm && (rc = judge_by_job(lc, key.buf))) {
		strbuf_release(&msgfile);
		strbuf_release(&log);
		strbuf_release(&key);
		return rc;
	}
	if (lc->slurm)          /* the job's verdict stands: no local one */
		strvec_push(&c.env, "AUTOKERNEL_REJUDGE=0");
	strvec_pushl(&c.args, "git", "commit", "-q", "--no-edit", "-F",
		     msgfile.buf, NULL);
	strvec_pushv(&c.env, lc->env.v);
	strbuf_reset(&lc->phase_path);
	strbuf_addf(&lc->phase_path, "%s/phase", repo_autokernel_dir());
	unlink(lc->phase_path.buf);
	strvec_pushf(&c.env, "AUTOKERNEL_PHASE=%s", lc->phase_path.buf);
	if (lc->tick) {
		c.tick = read_phase;
		c.tick_data = lc;
	}
	c.capture = 1;
	c.merge_err = 1;
	c.no_stdin = 1;
	c.timeout_ms = 4 * 3600 * 1000;
	rc = run_child(&c);
	write_file_atomic(log.buf, c.out.buf, c.out.len);
	if (rc && loop_count_attempts(name) == before &&
	    !rejected_on_record(key.buf)) {
		if (!run_interrupted)
			fprintf(stderr, "%s", c.out.buf);
		rc = -1;
	} else if (rc) {
		rc = 1;
	}
	if (rc >= 0)
		lc->result = commit_result(rc, key.buf);
	child_release(&c);
	strbuf_release(&msgfile);
	strbuf_release(&log);
	strbuf_release(&key);
	unlink(lc->phase_path.buf);
	return rc;
}

/* A commit whose post-commit hook was killed has no note but a pending
 * result: write it now, so the history stays whole. */
void loop_repair_head(void)
{
	git_oid head;
	json_t *note = NULL;

	if (repo_head(&head) || (note = note_read(&head))) {
		json_decref(note);
		return;
	}
	if (hook_note_commit(&head) > 0)
		warning("recovered the note of %s from an interrupted commit",
			git_oid_tostr_s(&head));
}

int loop_switch_to(const char *name)
{
	struct strbuf branch = STRBUF_INIT;
	char *cur = repo_branch_name();
	int rc = 0;

	if (!cur || strcmp(cur, name)) {
		strbuf_addf(&branch, "autokernel/%s", name);
		if (git_cmd(NULL, 0, "checkout", "-q", branch.buf, NULL))
			rc = error("unable to check out '%s'", branch.buf);
	}
	free(cur);
	strbuf_release(&branch);
	return rc;
}


void loop_commit_release(struct loop_commit *lc)
{
	json_decref(lc->result);
	lc->result = NULL;
	strvec_clear(&lc->env);
	strbuf_release(&lc->phase_path);
}
