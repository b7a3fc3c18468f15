/*
 * unit-cell.c: the cell around candidate code (lib/cell.h): which
 * variables pass, what a compiler's output keeps, and what a child in a
 * cell can still do (Landlock's checks only where the kernel has it).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "lib/cell.h"
#include "lib/paths.h"
#include "tests/tap.h"

static void env_names(void)
{
	static const char *const pass[] = {
		"PATH", "LANG", "LC_ALL", "CUDA_VISIBLE_DEVICES",
		"HIP_VISIBLE_DEVICES", "OMP_NUM_THREADS", "LD_LIBRARY_PATH",
		"NVCC_APPEND_FLAGS", "AUTOKERNEL_TRACE", "ASAN_OPTIONS",
	};
	static const char *const stop[] = {
		"AUTOKERNEL_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY",
		"GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD",
		"CUDA_API_KEY", "hip_token", "HOME", "TMPDIR", "LD_PRELOAD",
		"SSH_AUTH_SOCK", "AUTOKERNEL_LLM_URL", "GIT_DIR",
	};

	for (size_t i = 0; i < ARRAY_SIZE(pass); i++)
		ok(cell_env_allowed(pass[i]), "%s passes", pass[i]);
	for (size_t i = 0; i < ARRAY_SIZE(stop); i++)
		ok(!cell_env_allowed(stop[i]), "%s does not", stop[i]);
}

static int has(const struct strvec *env, const char *entry)
{
	for (size_t i = 0; i < env->nr; i++)
		if (!strcmp(env->v[i], entry))
			return 1;
	return 0;
}

static void environment(void)
{
	struct cell cell = CELL_INIT;
	struct strvec set = STRVEC_INIT, env = STRVEC_INIT;

	setenv("AUTOKERNEL_API_KEY", "sk-unit", 1);
	setenv("OMP_NUM_THREADS", "3", 1);
	setenv("CUDA_VISIBLE_DEVICES", "1", 1);
	cell_scratch(&cell, "/scratch");
	strvec_pushl(&set, "AK_RUNNER_STDERR=/scratch/stderr",
		     "CUDA_VISIBLE_DEVICES", NULL);
	cell_environ(&env, &cell, &set);
	ok(has(&env, "TMPDIR=/scratch") && has(&env, "HOME=/scratch"),
	   "TMPDIR and HOME are the scratch directory");
	ok(has(&env, "OMP_NUM_THREADS=3"), "an allowed variable is kept");
	ok(has(&env, "AK_RUNNER_STDERR=/scratch/stderr"),
	   "the child's own variables are set");
	ok(!has(&env, "CUDA_VISIBLE_DEVICES=1"), "and removed");
	ok(!has(&env, "AUTOKERNEL_API_KEY=sk-unit"), "the API key is not");
	strvec_clear(&env);
	strvec_clear(&set);
	cell_release(&cell);
}

/* The diagnostics of log for dir/kernel.c, into out. */
static void diag(struct strbuf *out, const char *dir, const char *log)
{
	struct strbuf src = STRBUF_INIT;

	strbuf_reset(out);
	strbuf_addf(&src, "%s/kernel.c", dir);
	cell_diagnostics(out, log, src.buf, dir);
	strbuf_release(&src);
}

static void diagnostics(const char *tmp)
{
	struct strbuf out = STRBUF_INIT, log = STRBUF_INIT;
	char dir[4200], link[4300];

	snprintf(dir, sizeof(dir), "%s/softmax", tmp);
	mkdir(dir, 0777);
	snprintf(link, sizeof(link), "%s/kernel.c", dir);
	write_file_atomic(link, "x\n", 2);
	snprintf(link, sizeof(link), "%s/helper.h", dir);
	write_file_atomic(link, "x\n", 2);
	snprintf(link, sizeof(link), "%s/out.h", dir);
	symlink("/etc/hostname", link);

	/* gcc, on a kernel that includes a readable secret */
	strbuf_addf(&log, "In file included from %s/kernel.c:3:\n"
		    "/etc/hostname:1:1: error: expected ';' before 'SECRET'\n"
		    "    1 | SECRET\n      | ^~~~~~\n"
		    "%s/kernel.c:5:9: error: 'c' undeclared\n"
		    "    5 | int b = c;\n      |         ^\n"
		    "compilation terminated.\n", dir, dir);
	diag(&out, dir, log.buf);
	ok(!strstr(out.buf, "SECRET"), "gcc: nothing of another file");
	ok(strstr(out.buf, "'c' undeclared") &&
	   strstr(out.buf, "int b = c;"), "gcc: the kernel's error and its "
	   "source line are kept");
	ok(strstr(out.buf, "left out") != NULL, "gcc: and what went is said");

	/* nvcc's front end */
	strbuf_reset(&log);
	strbuf_addf(&log, "/etc/hostname(1): error: expected a \";\"\n"
		    "  SECRET\n  ^\n\n%s/kernel.c(7): error: bad\n  int x;\n"
		    "\n2 errors detected in the compilation of \"%s/kernel.c\".\n",
		    dir, dir);
	diag(&out, dir, log.buf);
	ok(!strstr(out.buf, "SECRET") && strstr(out.buf, "(7): error: bad") &&
	   strstr(out.buf, "2 errors detected"), "nvcc: the same");

	/* paths that leave the directory, by .. or by a link */
	strbuf_reset(&log);
	strbuf_addf(&log, "%s/../softmax/helper.h:1:1: error: kept\n"
		    "%s/../../etc/hostname:1:1: error: SECRET\n"
		    "%s/out.h:1:1: error: SECRET\n  SECRET\n", dir, dir, dir);
	diag(&out, dir, log.buf);
	ok(strstr(out.buf, "error: kept") && !strstr(out.buf, "SECRET"),
	   "a path is judged resolved");

	/* Python's traceback, from a Triton kernel's syntax check: the
	 * frames of other files go */
	strbuf_reset(&log);
	strbuf_addf(&log, "Traceback (most recent call last):\n"
		    "  File \"/etc/hostname\", line 1, in <module>\n"
		    "    SECRET\n"
		    "  File \"%s/kernel.c\", line 10\n    return (\n"
		    "           ^\nSyntaxError: '(' was never closed\n", dir);
	diag(&out, dir, log.buf);
	ok(!strstr(out.buf, "SECRET") && strstr(out.buf, "line 10") &&
	   strstr(out.buf, "return (") && strstr(out.buf, "SyntaxError"),
	   "python: the kernel's frame and the exception are kept");

	/* a tool's own errors: the first is kept */
	strbuf_reset(&log);
	strbuf_addstr(&log, "ptxas fatal   : Unresolved extern function 'f'\n"
		      "collect2: error: ld returned 1 exit status\n");
	diag(&out, dir, log.buf);
	ok(strstr(out.buf, "ptxas fatal") && !strstr(out.buf, "collect2"),
	   "a tool's first error");

	/* bounded */
	strbuf_reset(&log);
	for (int i = 0; i < 50; i++)
		strbuf_addf(&log, "%s/kernel.c:%d:1: error: %0300d\n", dir, i, i);
	diag(&out, dir, log.buf);
	ok(out.len < CELL_DIAG_BYTES + 200 && strstr(out.buf, "more left out"),
	   "at most %d bytes (%zu)", CELL_DIAG_BYTES, out.len);
	strbuf_release(&out);
	strbuf_release(&log);
}

/* In a child: enters a cell that writes only scratch, then tries. */
static int confined(const char *scratch, const char *outside)
{
	struct cell cell = CELL_INIT;
	char path[4200];
	pid_t pid;
	int st, fd;

	cell_system(&cell);
	cell_scratch(&cell, scratch);
	fflush(NULL);
	pid = fork();
	if (!pid) {
		int bits = 0;
		long ssb = prctl(PR_GET_SPECULATION_CTRL, PR_SPEC_STORE_BYPASS,
				 0, 0, 0);
		long ib = prctl(PR_GET_SPECULATION_CTRL,
				PR_SPEC_INDIRECT_BRANCH, 0, 0, 0);

		if (cell_enter(&cell) < 0)
			_exit(100);
		if (prctl(PR_GET_SPECULATION_CTRL, PR_SPEC_STORE_BYPASS,
			  0, 0, 0) == ssb &&
		    prctl(PR_GET_SPECULATION_CTRL, PR_SPEC_INDIRECT_BRANCH,
			  0, 0, 0) == ib)
			bits |= 32;     /* speculation as it was */
		snprintf(path, sizeof(path), "%s/made", scratch);
		if ((fd = open(path, O_WRONLY | O_CREAT, 0644)) >= 0)
			bits |= 1;      /* the scratch directory is written */
		if (open(outside, O_WRONLY | O_CREAT, 0644) < 0)
			bits |= 2;      /* and nothing else */
		if (socket(AF_INET, SOCK_STREAM, 0) < 0 && errno == EACCES)
			bits |= 4;
		if (socket(AF_UNIX, SOCK_STREAM, 0) < 0 && errno == EACCES)
			bits |= 8;
		if (open("/usr/include/stdio.h", O_RDONLY) >= 0)
			bits |= 16;     /* the system is read */
		_exit(bits);
	}
	cell_release(&cell);
	if (pid < 0 || waitpid(pid, &st, 0) < 0 || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

static void child(const char *tmp)
{
	char scratch[4200], outside[4200];
	struct cell probe = CELL_INIT;
	int bits;

	snprintf(scratch, sizeof(scratch), "%s/scratch", tmp);
	snprintf(outside, sizeof(outside), "%s/outside", tmp);
	mkdir(scratch, 0777);
	cell_system(&probe);
	bits = confined(scratch, outside);
	ok(bits >= 0 && bits != 100, "a child enters its cell (%d)", bits);
	ok((bits & 1) && (bits & 16), "it writes its scratch, reads the system");
	if (probe.seccomp)
		ok((bits & 12) == 12, "no socket, not even AF_UNIX");
	else
		printf("ok %d # skip no socket (no seccomp here)\n", ++tests);
	/* a kernel that mitigates speculation for seccomp tasks would slow
	 * the runner's host side, and so its timings */
	ok(bits & 32, "the filter leaves speculation as it was");
	if (probe.landlock)
		ok((bits & 2) && access(outside, F_OK) < 0,
		   "and writes nothing else (Landlock ABI %d)", probe.landlock);
	else
		printf("ok %d # skip nothing written outside (no Landlock)\n",
		       ++tests);
	cell_release(&probe);
}

/* A virtual environment's interpreter, a link to /usr/bin's: its
 * environment is read, beside the installation it links into. */
static void virtual_env(const char *tmp)
{
	struct cell cell = CELL_INIT;
	char dir[4200], py[4300], real[4300];

	snprintf(dir, sizeof(dir), "%s/venv/bin", tmp);
	mkdir_p(dir);
	snprintf(py, sizeof(py), "%s/python3", dir);
	symlink("/bin/sh", py);
	snprintf(dir, sizeof(dir), "%s/venv", tmp);
	snprintf(real, sizeof(real), "%s/pyvenv.cfg", dir);
	write_file_atomic(real, "home = /usr/bin\n", 16);
	cell_toolchain(&cell, py);
	ok(has(&cell.read, dir), "a virtual environment is read");
	cell_release(&cell);
	unlink(real);
	cell_toolchain(&cell, py);
	ok(!has(&cell.read, dir), "a folder without pyvenv.cfg is not");
	cell_release(&cell);
}

int main(void)
{
	char tmp[] = "/tmp/unit-cell-XXXXXX";

	if (!mkdtemp(tmp))
		return 1;
	env_names();
	environment();
	diagnostics(tmp);
	virtual_env(tmp);
	child(tmp);
	remove_tree(tmp);
	return tap_done();
}
