/*
 * cell.h: the confinement of the children that build or run candidate
 * code, the compiler and the runner; never of git, hooks, agents or the
 * editor, which are the user's and not the agent's (doc/sandbox.md).
 *
 * A candidate is code an agent wrote, often a language model fed with
 * text it did not choose.  Its child starts in a cell:
 *
 *   environment  an allowlist (cell_env_allowed()): PATH, the locale, the
 *                toolchains' and GPU runtimes' variables; never a name
 *                that contains KEY, TOKEN, SECRET, PASSWORD, PASSWD or
 *                CREDENTIAL.  TMPDIR and HOME are the scratch directory.
 *   files        Landlock (Linux 5.13+): read and execute beneath c.read,
 *                open read-write beneath c.devices, create and write only
 *                beneath c.write; nothing else.  Inherited descriptors
 *                past stderr are closed.
 *   network      seccomp: socket() of every family fails with EACCES, of
 *                AF_UNIX too unless c.unix_sockets (a GPU runtime may
 *                talk to its daemons); io_uring is refused; a system call
 *                of a foreign arch kills the process.  no_new_privs.
 *   signals      where Landlock has scopes (ABI 6), no signal and no
 *                abstract unix socket reaches a process outside the cell.
 *
 * The parent describes the cell; run.c enters it in the child between
 * fork and exec, where it costs microseconds and no process of its own:
 *
 *	struct cell cell = CELL_INIT;
 *	struct child c = CHILD_INIT;
 *	if (cell_enabled()) {                   // autokernel.sandbox
 *		cell_system(&cell);                 // /usr, /lib, ld.so.cache...
 *		cell_toolchain(&cell, "nvcc");      // its install, from PATH
 *		cell_read(&cell, kernel_dir);
 *		cell_scratch(&cell, scratch);       // written; TMPDIR and HOME
 *		c.cell = &cell;
 *	}
 *	rc = run_child(&c);
 *	child_release(&c);
 *	cell_release(&cell);
 *
 * The cell must live until start_child() or run_child() has returned.
 * Paths are copied; one that does not exist is no rule.  Where the
 * kernel has no Landlock (or no seccomp), cell_system() says so once per
 * run (`run` passes the word on to its hooks) and the rest still holds.
 */
#ifndef CELL_H
#define CELL_H

#include "lib/run.h"
#include "lib/strbuf.h"

struct cell {
	struct strvec read;     /* read and execute beneath each */
	struct strvec write;    /* also create, write, remove (a file: rw) */
	struct strvec devices;  /* open read-write beneath, create nothing */
	char *scratch;          /* TMPDIR and HOME (in write) */
	unsigned unix_sockets:1;/* AF_UNIX sockets stay (a GPU runtime's) */
	int landlock;           /* the kernel's Landlock ABI; 0: none */
	int seccomp;            /* seccomp filters work here */
};
#define CELL_INIT { .read = STRVEC_INIT, .write = STRVEC_INIT, \
		    .devices = STRVEC_INIT }

/* autokernel.sandbox (default true), read once per process; when it is
 * false this warns, once per process, that the candidate runs
 * unconfined, so every judgement's output says so. */
int cell_enabled(void);

/* Probes the kernel for Landlock and seccomp, once per process; where
 * one is missing, says so once per run (the processes this one starts
 * inherit AK_CELL_WARNED).  cell_system() calls it. */
void cell_probe(void);

/* What every cell reads: /usr, /lib, /lib64, /bin, /sbin, the loader's
 * and a few other files of /etc, /proc/self and the /proc and /sys
 * files a libc reads, /dev/null, /dev/zero, /dev/urandom.  Probes the
 * kernel into c.landlock and c.seccomp.  The directories of
 * LD_LIBRARY_PATH too, except / and $HOME and what holds it. */
void cell_system(struct cell *c);
/* The compiler (a path, or a name looked up in PATH), resolved, and its
 * install: the directory above its bin/, or its own directory, unless
 * that is / or $HOME or holds $HOME. */
void cell_toolchain(struct cell *c, const char *compiler);
/* A GPU's device files (/dev/nvidia*, /dev/kfd, /dev/dri), what its
 * runtime reads of /proc and /sys, an MPS pipe directory; AF_UNIX
 * sockets. */
void cell_gpu(struct cell *c);
void cell_read(struct cell *c, const char *path);
/* Each absolute directory of a ':'-separated list (LD_LIBRARY_PATH,
 * PYTHONPATH), read; "/" and the user's home and above are skipped. */
void cell_path_list(struct cell *c, const char *list);
void cell_write(struct cell *c, const char *path);
void cell_scratch(struct cell *c, const char *dir);
void cell_release(struct cell *c);

/* Whether the environment variable name passes into a cell. */
int cell_env_allowed(const char *name);

/*
 * For run.c.  cell_environ(), in the parent: the child's environment
 * into out ("NAME=value" each), the allowed part of ours, TMPDIR and
 * HOME, then set (child.env: "NAME=value" sets, "NAME" removes).
 * cell_enter(), in the child after its descriptors are in place:
 * 0, or -1 with errno set (the child must not exec then).
 */
void cell_environ(struct strvec *out, const struct cell *c,
		  const struct strvec *set);
int cell_enter(const struct cell *c);

/*
 * What leaves the cell of a compiler's output (log) for a verdict, and
 * so for notes, pending results and prompts: the lines about src (the
 * candidate's file) and other files beneath dir (its directory), with
 * their quoted source and carets; the first line of a tool's own error
 * ("collect2: error: ...", "nvcc fatal : ..."); no line about any other
 * file.  At most CELL_DIAG_LINES lines and CELL_DIAG_BYTES bytes, and a
 * last line saying what was left out.  Paths are compared resolved, so
 * "dir/../x" and a link out of dir count as other files; this holds
 * whether or not Landlock kept the compiler from reading them.
 */
#define CELL_DIAG_LINES 30
#define CELL_DIAG_BYTES 4096
void cell_diagnostics(struct strbuf *out, const char *log, const char *src,
		      const char *dir);

#endif
