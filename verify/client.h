/*
 * client.h: the parent's side of a runner process (backends/runner.c).
 *
 *	struct runner r = RUNNER_INIT;
 *	struct strbuf why = STRBUF_INIT;
 *	if (runner_start(&r, "host", 30000, &why) < 0) // 30 s per request
 *		... why says it: "cannot start", or hello's "no device" ...
 *	void *mem = runner_shm(&r, bytes);             // tensors go here
 *	json_t *res = runner_request(&r, req, timeout_ms, &why);
 *	if (!res) ... why says "timed out after 30.0 s", "crashed: ..." ...
 *	runner_stop(&r);
 *
 * A request that kills the process (a crash, a hang past its limit, a
 * sticky device error) returns NULL with the reason; the next request
 * starts a fresh process and reloads the kernels, so one bad case never
 * poisons the next.
 */
#ifndef VERIFY_CLIENT_H
#define VERIFY_CLIENT_H

#include <jansson.h>
#include "ak-wire.h"
#include "lib/run.h"

#define RUNNER_SLOTS AK_WIRE_SLOTS

struct runner {
	char backend[16];
	struct child c;
	int alive;
	int timeout_ms;
	char *slot_path[RUNNER_SLOTS];
	char shm_path[4096];
	void *shm;
	size_t shm_size;
	int shm_fd;
	char err_path[4096];
	char *scratch;          /* the runner's TMPDIR, HOME and stderr */
	json_t *hello;
	struct strbuf rbuf;     /* what the runner wrote past a line */
};
#define RUNNER_INIT { .c = CHILD_INIT, .shm_fd = -1, .rbuf = STRBUF_INIT }

/* Starts the runner and says hello: 0, -1 when it cannot be started or
 * does not answer, or AK_EENV when the backend has no device (why says
 * which; nothing is printed). */
int runner_start(struct runner *r, const char *backend, int timeout_ms,
		 struct strbuf *why);
/* The same in two steps: the runner opens its device as soon as it is
 * spawned, so a caller can compile while it does, then say hello. */
int runner_spawn(struct runner *r, const char *backend, int timeout_ms,
		 struct strbuf *why);
int runner_hello(struct runner *r, struct strbuf *why);
void runner_stop(struct runner *r);
/* Ends the process; the next request starts a fresh one, which loads
 * the same kernels and maps the same tensors. */
void runner_recycle(struct runner *r);

/* A mapping of at least size bytes shared with the runner. */
void *runner_shm(struct runner *r, size_t size);

/* Loads a built kernel into slot n (kept across restarts). */
int runner_load(struct runner *r, int slot, const char *so,
		struct strbuf *why);

/* One request; NULL when the process died or timed out (why says how,
 * with the tail of its stderr).  The caller json_decref()s the reply. */
json_t *runner_request(struct runner *r, json_t *req, int timeout_ms,
		       struct strbuf *why);

/*
 * A request that is a conversation (the benchmark's, doc/runner-
 * protocol.md): runner_request() sends it and returns the runner's first
 * line; runner_reply() sends the parent's answer, runner_next() reads the
 * runner's next line.  NULL or -1, with why, when the runner died or
 * timed out (it is started again for the next request).
 */
json_t *runner_next(struct runner *r, int timeout_ms, struct strbuf *why);
int runner_reply(struct runner *r, json_t *msg, struct strbuf *why);

#endif
