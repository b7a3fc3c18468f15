/*
 * slurm.c: judgements as Slurm jobs (judge/slurm.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "judge/slurm.h"
#include "lib/paths.h"
#include "lib/repo.h"
#include "lib/result.h"

#define SLURM_CMD_MS (60 * 1000)

static void job_path(struct strbuf *out, const char *what)
{
	strbuf_addf(out, "%s/job.%s", repo_autokernel_dir(), what);
}

/* s in single quotes for sh: 'it'\''s' */
static void add_quoted(struct strbuf *sb, const char *s)
{
	strbuf_addch(sb, '\'');
	for (; *s; s++) {
		if (*s == '\'')
			strbuf_addstr(sb, "'\\''");
		else
			strbuf_addch(sb, *s);
	}
	strbuf_addch(sb, '\'');
}

static int write_script(const char *name, const git_oid *commit)
{
	struct strbuf sh = STRBUF_INIT, path = STRBUF_INIT, res = STRBUF_INIT;
	int ret;

	job_path(&path, "sh");
	job_path(&res, "json");
	unlink(res.buf);
	strbuf_addstr(&sh, "#!/bin/sh\n# git autokernel run --slurm: one "
		      "judgement; the repository must be at this path here\n"
		      "cd ");
	add_quoted(&sh, repo_workdir());
	strbuf_addstr(&sh, " || exit 3\nexec ");
	add_quoted(&sh, ak_exe());
	strbuf_addstr(&sh, " judge-job --name ");
	add_quoted(&sh, name);
	strbuf_addstr(&sh, " --output ");
	add_quoted(&sh, res.buf);
	strbuf_addf(&sh, " %s\n", git_oid_tostr_s(commit));
	ret = write_file_atomic(path.buf, sh.buf, sh.len);
	strbuf_release(&sh);
	strbuf_release(&path);
	strbuf_release(&res);
	return ret;
}

/* sbatch the script: the job's id, or -1 after an error. */
static long submit(const struct slurm *s, const char *name,
		   const struct strvec *env)
{
	struct child c = CHILD_INIT;
	struct strbuf path = STRBUF_INIT, log = STRBUF_INIT;
	long id = -1;
	int rc;

	job_path(&path, "sh");
	job_path(&log, "log");
	strvec_pushl(&c.args, "sbatch", "--parsable", "--export=ALL", NULL);
	strvec_pushf(&c.args, "--job-name=autokernel-%s", name);
	strvec_pushf(&c.args, "--output=%s", log.buf);
	strvec_pushf(&c.args, "--time=%d", (s->timeout_s + 59) / 60);
	if (s->partition)
		strvec_pushf(&c.args, "--partition=%s", s->partition);
	if (s->gres)
		strvec_pushf(&c.args, "--gres=%s", s->gres);
	strvec_push(&c.args, path.buf);
	if (env)
		strvec_pushv(&c.env, env->v);
	c.capture = 1;
	c.no_stdin = 1;
	c.timeout_ms = SLURM_CMD_MS;
	rc = run_child(&c);
	if (!rc)
		id = strtol(c.out.buf, NULL, 10);
	if (id <= 0) {
		strbuf_trim(&c.err);
		error("sbatch failed: %s", c.err.len ? c.err.buf : c.out.buf);
		id = -1;
	}
	child_release(&c);
	strbuf_release(&path);
	strbuf_release(&log);
	return id;
}

/* The job's state as squeue says it ("RUNNING", "COMPLETED"; "" once
 * Slurm has forgotten it): 0, or -1 when squeue failed (a job it does
 * not know, or a controller that does not answer). */
static int job_state(struct strbuf *state, long id)
{
	struct child c = CHILD_INIT;
	int rc;

	strvec_pushl(&c.args, "squeue", "-h", "-t", "all", "-o", "%T", NULL);
	strvec_pushf(&c.args, "--job=%ld", id);
	c.capture = 1;
	c.no_stdin = 1;
	c.timeout_ms = SLURM_CMD_MS;
	strbuf_reset(state);
	rc = run_child(&c);
	if (!rc)
		strbuf_addbuf(state, &c.out);
	strbuf_trim(state);
	child_release(&c);
	return rc ? -1 : 0;
}

static int job_active(const char *state)
{
	static const char *const active[] = { "PENDING", "CONFIGURING",
		"RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING",
		"STAGE_OUT", "SIGNALING", NULL };

	for (int i = 0; active[i]; i++)
		if (!strcmp(state, active[i]))
			return 1;
	return 0;
}

static void cancel(long id)
{
	struct child c = CHILD_INIT;

	strvec_push(&c.args, "scancel");
	strvec_pushf(&c.args, "%ld", id);
	c.capture = 1;
	c.no_stdin = 1;
	c.timeout_ms = SLURM_CMD_MS;
	run_child(&c);
	child_release(&c);
}

/* Until the job ends (its last state into state): 0, or 1 when the run
 * was interrupted or the wait timed out, and the job was cancelled. */
static int wait_job(long id, int timeout_s, struct strbuf *state)
{
	struct strbuf now = STRBUF_INIT;
	long long t0 = now_ns();
	int failed = 0, ret = 0;

	for (;;) {
		double el = (now_ns() - t0) / 1e9;

		failed = job_state(&now, id) < 0 ? failed + 1 : 0;
		if (now.len) {
			strbuf_reset(state);
			strbuf_addbuf(state, &now);
		}
		/* a job squeue no longer knows has ended long ago */
		if (failed >= 3 || (!failed && !job_active(now.buf)))
			break;
		if (run_interrupted || el > timeout_s) {
			cancel(id);
			strbuf_reset(state);
			strbuf_addstr(state, run_interrupted ?
				      "cancelled: the run was stopped" :
				      "cancelled: timed out");
			ret = 1;
			break;
		}
		/* short polls while a host judgement would still be going */
		usleep(el < 10 ? 100000 : 1000000);
	}
	strbuf_release(&now);
	return ret;
}

/* The job's result; on a shared filesystem it may show a moment late. */
static json_t *read_result(void)
{
	struct strbuf path = STRBUF_INIT;
	json_t *res = NULL;

	job_path(&path, "json");
	for (int i = 0; i < 50 && !res; i++) {
		res = json_load_file(path.buf, 0, NULL);
		if (!res && !access(path.buf, F_OK))
			break;          /* there, and not JSON */
		if (!res)
			usleep(100000);
	}
	strbuf_release(&path);
	return res;
}

/* Whether res is a judgement: it says kept or rejected. */
static int judged(json_t *res)
{
	struct result r;
	int yes;

	result_from_note(&r, res);
	yes = r.keep >= 0;
	result_release(&r);
	return yes;
}

static void why_no_result(struct strbuf *why, long id, const char *state)
{
	struct strbuf path = STRBUF_INIT, log = STRBUF_INIT;
	const char *tail;

	job_path(&path, "log");
	strbuf_addf(why, "Slurm job %ld ended without a result (%s)", id,
		    *state ? state : "gone");
	if (strbuf_read_file(&log, path.buf) > 0) {
		strbuf_trim(&log);
		tail = log.buf + log.len;
		for (int n = 0; n < 6 && tail > log.buf; n++)
			while (--tail > log.buf && tail[-1] != '\n')
				;
		strbuf_addf(why, "; its log ends:\n%s", tail);
	}
	strbuf_release(&path);
	strbuf_release(&log);
}

int slurm_judge(json_t **res, const struct slurm *s, const char *name,
		const git_oid *commit, const struct strvec *env,
		struct strbuf *why)
{
	struct strbuf path = STRBUF_INIT, state = STRBUF_INIT, id = STRBUF_INIT;
	long job;
	int ret = 1;

	*res = NULL;
	if (write_script(name, commit) < 0 || (job = submit(s, name, env)) < 0)
		return -1;
	job_path(&path, "id");
	strbuf_addf(&id, "%ld\n", job);
	write_file_atomic(path.buf, id.buf, id.len);
	if (wait_job(job, s->timeout_s, &state)) {
		strbuf_addf(why, "Slurm job %ld %s", job, state.buf);
		goto cleanup;
	}
	*res = read_result();
	if (judged(*res))
		ret = 0;
	else
		why_no_result(why, job, state.buf);
cleanup:
	if (ret) {
		json_decref(*res);
		*res = NULL;
	}
	strbuf_reset(&path);
	job_path(&path, "id");
	unlink(path.buf);
	strbuf_release(&path);
	strbuf_release(&state);
	strbuf_release(&id);
	return ret;
}

void slurm_cancel_left(void)
{
	struct strbuf path = STRBUF_INIT, id = STRBUF_INIT;

	job_path(&path, "id");
	if (strbuf_read_file(&id, path.buf) > 0 && atol(id.buf) > 0) {
		warning("cancelling Slurm job %ld of a worker that stopped",
			atol(id.buf));
		cancel(atol(id.buf));
	}
	unlink(path.buf);
	strbuf_release(&path);
	strbuf_release(&id);
}

int slurm_check(void)
{
	struct child c = CHILD_INIT;
	int rc;

	strvec_pushl(&c.args, "sbatch", "--version", NULL);
	c.capture = 1;
	c.no_stdin = 1;
	c.timeout_ms = SLURM_CMD_MS;
	rc = run_child(&c);
	child_release(&c);
	if (rc)
		return error("--slurm needs Slurm's sbatch on PATH (and "
			     "squeue, scancel)");
	return 0;
}
