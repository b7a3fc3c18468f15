/*
 * run.h: the one way this tool starts a child process (compiler, runner,
 * hook, agent, git), always with a time limit.
 *
 * A child runs in its own process group, so a timeout or a Ctrl-C of the
 * tool kills it and everything it started (nvcc's cicc and ptxas, an
 * agent's subprocesses).  The recipe:
 *
 *	struct child c = CHILD_INIT;
 *	strvec_pushl(&c.args, "cc", "-shared", "-o", so, src, NULL);
 *	c.timeout_ms = 120000;
 *	c.capture = 1;                  // stdout and stderr into c.out, c.err
 *	rc = run_child(&c);             // exit code, 128+signal, or 124
 *	if (c.timed_out) ...
 *	child_release(&c);
 *
 * run_child() returns the exit status: the child's exit code, 128+N when
 * signal N killed it, 124 when the time limit killed it (c.timed_out set),
 * and -1 when it could not be started (an error() was printed and c.err
 * holds the reason; 127 is never used for that).
 *
 * For a long-lived child spoken to over pipes (the runner), start_child()
 * with want_stdin/want_stdout gives c.in (write end) and c.out_fd (read end);
 * finish_child() closes them and waits; kill_child() ends it at once.
 *
 * A child that builds or runs candidate code (the compiler, the runner)
 * gets c.cell (cell.h): it starts with the cell's environment (c.env on
 * top) and enters the cell between fork and exec.  No other child does.
 */
#ifndef RUN_H
#define RUN_H

#include <signal.h>
#include <sys/types.h>
#include "lib/strbuf.h"
#include "lib/trace.h"            /* now_ns() */

struct strvec {
	const char **v;
	size_t nr, alloc;
};
#define STRVEC_INIT { NULL, 0, 0 }
void strvec_push(struct strvec *sv, const char *s);
void strvec_pushf(struct strvec *sv, const char *fmt, ...) AK_PRINTF(2, 3);
void strvec_pushl(struct strvec *sv, ...);      /* NULL-terminated */
void strvec_pushv(struct strvec *sv, const char *const *v);
void strvec_clear(struct strvec *sv);

struct cell;

struct child {
	struct strvec args;     /* args.v[0] is looked up in PATH */
	struct strvec env;      /* "NAME=value" to set, "NAME" to unset */
	const char *dir;        /* working directory, or NULL */
	int timeout_ms;         /* 0: no limit (only for interactive use) */
	unsigned capture:1;     /* collect stdout and stderr */
	unsigned merge_err:1;   /* with capture: stderr into out as well */
	unsigned quiet:1;       /* without capture: send stdout to stderr */
	unsigned no_stdin:1;    /* stdin from /dev/null */
	unsigned want_stdin:1;  /* start_child: a pipe into the child */
	unsigned want_stdout:1; /* start_child: a pipe from the child */
	unsigned same_group:1;  /* stay in our process group (a terminal) */
	const char *stdin_data; /* run_child: written to the child's stdin */
	size_t stdin_len;
	/* run_child: called about every 200 ms while the child runs */
	void (*tick)(void *data);
	void *tick_data;
	const struct cell *cell;/* candidate code: confined (not owned) */

	struct strbuf out, err;
	pid_t pid;
	int in, out_fd, err_fd;
	int timed_out;
	int status;
	long long start_ns;
};
#define CHILD_INIT { .args = STRVEC_INIT, .env = STRVEC_INIT, \
		     .out = STRBUF_INIT, .err = STRBUF_INIT, \
		     .pid = -1, .in = -1, .out_fd = -1, .err_fd = -1 }

int run_child(struct child *c);
int start_child(struct child *c);
int finish_child(struct child *c, int timeout_ms);
/* For several children at once: CHILD_RUNNING while c runs, else its
 * exit status as run_child() gives it; never waits. */
#define CHILD_RUNNING (-2)
int child_poll(struct child *c);
void kill_child(struct child *c);
void child_release(struct child *c);

/* The exit status as a phrase: "exited with 2", "was killed by signal 9
 * (SIGKILL)", "timed out after 30 s"; into buf. */
void child_describe(const struct child *c, int status, char *buf, size_t n);

/* Kill every live child's process group on SIGINT, SIGTERM and SIGHUP,
 * remove the registered temporary directories (tempdir.h), then die of
 * the same signal.  Called once from main(). */
void run_setup_signals(void);

/*
 * Whether a signal is git's copy of one we were sent as well.  `git
 * autokernel CMD` runs us under git, in the same process group: a Ctrl-C
 * on the terminal reaches both, and git's handler sends it on to us
 * again before it waits for us.  A handler installed with SA_SIGINFO
 * passes its siginfo here and counts such a copy as no new signal.
 * Signal-safe.
 */
int run_signal_from_git(const siginfo_t *si);
/* Sends sig to every live child's process group (signal-safe). */
void run_signal_children(int sig);

/* Set by the signal handler; long loops check it and stop cleanly. */
extern volatile int run_interrupted;

#endif
