/*
 * agent.h: the agents that propose experiments.  An agent edits the
 * kernel file in the work tree and says what it expects (a one-line
 * hypothesis); it never builds or runs a kernel: the loop commits the
 * edit through `git commit`, so the hooks judge every candidate.
 *
 *	struct agent *a = agent_new("tune");            // or "exec", "llm"
 *	if (a->init(a, argc, argv) < 0) ...             // exec: the command
 *	struct proposal pr = PROPOSAL_INIT;
 *	rc = a->propose(a, &ctx, &pr);
 *	// 0 edited (pr.hypothesis set); 1 this experiment failed on the
 *	// agent's side (pr.failure says why: a bad reply, a crash, a
 *	// timeout); 2 nothing left to try; -1 stop the run (pr.failure)
 *	proposal_release(&pr);
 *	agent_free(a);
 *
 * The context is read-only for the agent; everything in it comes from
 * git (history, notes) and from the problem, so an agent keeps no state
 * of its own between runs.
 */
#ifndef AGENT_H
#define AGENT_H

#include <jansson.h>
#include "lib/history.h"
#include "ops/problem.h"
#include "lib/strbuf.h"

struct agent_context {
	const char *name;               /* the experiment: autokernel/<name> */
	const char *workdir;            /* work tree top, with trailing '/' */
	const char *kernel_path;        /* absolute path of the kernel file */
	const char *kernel_rel;         /* "<name>/kernel.cu" */
	const char *prompt_path;        /* the prompt file for this proposal */
	const struct problem *p;
	const struct history *h;        /* kept and rejected, oldest first */
	json_t *device;                 /* the device's ceilings, or NULL */
	int experiment;                 /* 1-based, across runs */
	int timeout_ms;                 /* the agent's own time limit */
	/* With several workers (run --workers): claims a candidate by a key
	 * the agent chooses (the tuner: its configuration) so that no two
	 * workers try it; 0 claimed, 1 another worker has it (propose
	 * another).  NULL when the run has one worker. */
	int (*claim)(void *data, const char *key);
	void *claim_data;
};

struct proposal {
	struct strbuf hypothesis;       /* one line */
	struct strbuf failure;          /* why the agent failed */
	json_t *usage;                  /* e.g. tokens; goes into the note */
};
#define PROPOSAL_INIT { STRBUF_INIT, STRBUF_INIT, NULL }
void proposal_release(struct proposal *pr);

struct agent {
	const char *name;
	/* Parses the agent's own arguments (exec: the command after --). */
	int (*init)(struct agent *a, int argc, char **argv);
	int (*propose)(struct agent *a, const struct agent_context *ctx,
		       struct proposal *out);
	void (*release)(struct agent *a);
	void *data;
};

/* NULL for an unknown agent name. */
struct agent *agent_new(const char *name);
void agent_free(struct agent *a);

/* The prompt an external agent or a model reads: the task, the op's
 * contract and the ABI, device and ceilings, the kernel's place on the
 * roofline, the recent history with verdicts, the last failure's detail,
 * the playbook, and the current kernel.  Written to ctx->prompt_path by
 * prompt_write(). */
void prompt_build(struct strbuf *out, const struct agent_context *ctx,
		  int with_kernel);
int prompt_write(const struct agent_context *ctx);
/* The info string of a fenced block for a kernel file: cuda, c, cpp. */
const char *fence_lang(const char *path);

struct agent *agent_tune_new(void);
struct agent *agent_exec_new(void);
struct agent *agent_llm_new(void);

#endif
