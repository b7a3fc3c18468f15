/*
 * runner.h: the parent's side of a runner process (backends/runner.c).
 *
 *	struct runner r = RUNNER_INIT;
 *	if (runner_start(&r, "host", 30000) < 0) ...   // exit 3: no device
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
#ifndef VERIFY_RUNNER_H
#define VERIFY_RUNNER_H

#include <jansson.h>
#include "lib/run.h"

#define RUNNER_SLOTS 8

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
};
#define RUNNER_INIT { .c = CHILD_INIT, .shm_fd = -1 }

/* Starts the runner and says hello: 0, -1 (error printed), or -3 when the
 * backend has no device (hello's error in why). */
int runner_start(struct runner *r, const char *backend, int timeout_ms,
		 struct strbuf *why);
/* The same in two steps: the runner opens its device as soon as it is
 * spawned, so a caller can compile while it does, then say hello. */
int runner_spawn(struct runner *r, const char *backend, int timeout_ms,
		 struct strbuf *why);
int runner_hello(struct runner *r, struct strbuf *why);
void runner_stop(struct runner *r);

/* A mapping of at least size bytes shared with the runner. */
void *runner_shm(struct runner *r, size_t size);

/* Loads a built kernel into slot n (kept across restarts). */
int runner_load(struct runner *r, int slot, const char *so,
		struct strbuf *why);

/* One request; NULL when the process died or timed out (why says how,
 * with the tail of its stderr).  The caller json_decref()s the reply. */
json_t *runner_request(struct runner *r, json_t *req, int timeout_ms,
		       struct strbuf *why);

#endif
