/*
 * exec.c: any external coding agent or script as an agent.
 *
 * `git autokernel run --agent exec -- CMD ARGS...` runs CMD in the work
 * tree once per experiment, under a time limit, with
 *   AUTOKERNEL_KERNEL   the kernel file's path (edit it in place)
 *   AUTOKERNEL_PROMPT   a file: task, contract, device, history, verdicts
 *   AUTOKERNEL_MESSAGE  a file CMD may write its one-line hypothesis to
 * Its output goes to $GIT_DIR/autokernel/agent.log.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "agent/agent.h"
#include "lib/repo.h"
#include "lib/run.h"

struct exec_data {
	struct strvec cmd;
};

static int exec_init(struct agent *a, int argc, char **argv)
{
	struct exec_data *d = xcalloc(1, sizeof(*d));

	if (argc < 1) {
		free(d);
		return error("--agent exec needs a command: run --agent exec "
			     "-- CMD ARGS...");
	}
	for (int i = 0; i < argc; i++)
		strvec_push(&d->cmd, argv[i]);
	a->data = d;
	return 0;
}

static void read_hypothesis(struct strbuf *out, const char *path)
{
	struct strbuf sb = STRBUF_INIT;

	if (strbuf_read_file(&sb, path) >= 0) {
		strbuf_trim(&sb);
		strbuf_add(out, sb.buf, strcspn(sb.buf, "\n"));
	}
	strbuf_release(&sb);
}

static void save_log(struct child *c, const char *path)
{
	struct strbuf all = STRBUF_INIT;

	strbuf_addbuf(&all, &c->out);
	write_file_atomic(path, all.buf, all.len);
	strbuf_release(&all);
}

static int exec_propose(struct agent *a, const struct agent_context *ctx,
			struct proposal *pr)
{
	struct exec_data *d = a->data;
	struct child c = CHILD_INIT;
	struct strbuf msg = STRBUF_INIT, log = STRBUF_INIT;
	char desc[128];
	int rc, ret = 0;

	if (prompt_write(ctx) < 0) {
		strbuf_addstr(&pr->failure, "cannot write the prompt file");
		return -1;
	}
	strbuf_addf(&msg, "%s/message", repo_autokernel_dir());
	strbuf_addf(&log, "%s/agent.log", repo_autokernel_dir());
	unlink(msg.buf);
	strvec_pushv(&c.args, d->cmd.v);
	strvec_pushf(&c.env, "AUTOKERNEL_KERNEL=%s", ctx->kernel_path);
	strvec_pushf(&c.env, "AUTOKERNEL_PROMPT=%s", ctx->prompt_path);
	strvec_pushf(&c.env, "AUTOKERNEL_MESSAGE=%s", msg.buf);
	strvec_pushf(&c.env, "AUTOKERNEL_EXPERIMENT=%d", ctx->experiment);
	/* The agent must not see our hook-time index override. */
	strvec_push(&c.env, "GIT_INDEX_FILE");
	c.dir = ctx->workdir;
	c.timeout_ms = ctx->timeout_ms;
	c.capture = 1;
	c.merge_err = 1;
	c.no_stdin = 1;
	rc = run_child(&c);
	save_log(&c, log.buf);
	if (rc) {
		child_describe(&c, rc, desc, sizeof(desc));
		strbuf_addf(&pr->failure, "the agent '%s' %s%s", d->cmd.v[0],
			    desc, c.timed_out ? " (autokernel.agentTimeout)" : "");
		if (c.out.len) {
			strbuf_addstr(&pr->failure, "; its last output:\n");
			strbuf_add_indented(&pr->failure,
				c.out.len > 600 ? c.out.buf + c.out.len - 600 :
				c.out.buf, "    ");
		}
		ret = rc < 0 ? -1 : 1;
		goto cleanup;
	}
	read_hypothesis(&pr->hypothesis, msg.buf);
	if (!pr->hypothesis.len)
		strbuf_addf(&pr->hypothesis, "%s: experiment %d", d->cmd.v[0],
			    ctx->experiment);
cleanup:
	child_release(&c);
	strbuf_release(&msg);
	strbuf_release(&log);
	return ret;
}

static void exec_release(struct agent *a)
{
	struct exec_data *d = a->data;

	if (d)
		strvec_clear(&d->cmd);
	free(d);
}

struct agent *agent_exec_new(void)
{
	struct agent *a = xcalloc(1, sizeof(*a));

	a->name = "exec";
	a->init = exec_init;
	a->propose = exec_propose;
	a->release = exec_release;
	return a;
}
