#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "lib/cell.h"
#include "lib/run.h"
#include "lib/tempdir.h"

volatile int run_interrupted;

#define MAX_LIVE 256
static volatile pid_t live[MAX_LIVE];

void strvec_push(struct strvec *sv, const char *s)
{
	ALLOC_GROW(sv->v, sv->nr + 2, sv->alloc);
	sv->v[sv->nr++] = xstrdup(s);
	sv->v[sv->nr] = NULL;
}

void strvec_pushf(struct strvec *sv, const char *fmt, ...)
{
	struct strbuf sb = STRBUF_INIT;
	va_list ap;

	va_start(ap, fmt);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	strvec_push(sv, sb.buf);
	strbuf_release(&sb);
}

void strvec_pushl(struct strvec *sv, ...)
{
	const char *s;
	va_list ap;

	va_start(ap, sv);
	while ((s = va_arg(ap, const char *)))
		strvec_push(sv, s);
	va_end(ap);
}

void strvec_pushv(struct strvec *sv, const char *const *v)
{
	for (; v && *v; v++)
		strvec_push(sv, *v);
}

void strvec_clear(struct strvec *sv)
{
	for (size_t i = 0; i < sv->nr; i++)
		free((char *)sv->v[i]);
	free(sv->v);
	sv->v = NULL;
	sv->nr = sv->alloc = 0;
}

static void track(pid_t pid)
{
	for (int i = 0; i < MAX_LIVE; i++)
		if (!live[i]) {
			live[i] = pid;
			return;
		}
}

static void untrack(pid_t pid)
{
	for (int i = 0; i < MAX_LIVE; i++)
		if (live[i] == pid)
			live[i] = 0;
}

void run_signal_children(int sig)
{
	for (int i = 0; i < MAX_LIVE; i++)
		if (live[i] > 0)
			kill(-live[i], sig);
}

static pid_t git_parent;

/* Our parent, when it is git's wrapper of `git autokernel CMD`. */
static void find_git_parent(void)
{
	char path[64], comm[64] = "";
	pid_t ppid = getppid();
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)ppid);
	f = fopen(path, "r");
	if (!f)
		return;
	if (fgets(comm, sizeof(comm), f) && !strcmp(comm, "git\n"))
		git_parent = ppid;
	fclose(f);
}

int run_signal_from_git(const siginfo_t *si)
{
	return git_parent > 0 && si && si->si_code == SI_USER &&
		si->si_pid == git_parent;
}

static void on_signal(int sig)
{
	for (int i = 0; i < MAX_LIVE; i++)
		if (live[i] > 0)
			kill(-live[i], SIGKILL);
	run_interrupted = sig;
	tempdir_remove_all();
	signal(sig, SIG_DFL);
	raise(sig);
}

void run_setup_signals(void)
{
	struct sigaction sa;

	find_git_parent();

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

static void set_env(const struct strvec *env)
{
	for (size_t i = 0; i < env->nr; i++) {
		const char *eq = strchr(env->v[i], '=');

		if (eq) {
			char *name = xstrndup(env->v[i], eq - env->v[i]);

			setenv(name, eq + 1, 1);
		} else {
			unsetenv(env->v[i]);
		}
	}
}

/* envp: the whole environment of a child in a cell, else NULL. */
static void child_exec(struct child *c, int in_fd, int out_fd, int err_fd,
		       char **envp)
{
	if (!c->same_group)
		setpgid(0, 0);
	signal(SIGPIPE, SIG_DFL);
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	if (in_fd >= 0)
		dup2(in_fd, 0);
	if (out_fd >= 0)
		dup2(out_fd, 1);
	if (err_fd >= 0)
		dup2(err_fd, 2);
	if (!envp)
		set_env(&c->env);
	if (c->dir && chdir(c->dir) < 0) {
		fprintf(stderr, "error: cannot enter '%s': %s\n", c->dir,
			strerror(errno));
		_exit(126);
	}
	if (c->cell && cell_enter(c->cell) < 0) {
		fprintf(stderr, "error: cannot confine '%s': %s\n",
			c->args.v[0], strerror(errno));
		_exit(126);
	}
	if (envp)
		execvpe(c->args.v[0], (char *const *)c->args.v, envp);
	else
		execvp(c->args.v[0], (char *const *)c->args.v);
	fprintf(stderr, "error: cannot run '%s': %s\n", c->args.v[0],
		strerror(errno));
	_exit(errno == ENOENT ? 127 : 126);
}

static int make_pipe(int fds[2])
{
	if (pipe2(fds, O_CLOEXEC) < 0)
		return error_errno("unable to create a pipe");
	return 0;
}

int start_child(struct child *c)
{
	int inp[2] = { -1, -1 }, outp[2] = { -1, -1 }, errp[2] = { -1, -1 };
	int null_fd = -1;
	struct strvec envp = STRVEC_INIT;
	static char *no_env[] = { NULL };

	if (!c->args.nr)
		return error("no command to run");
	if ((c->want_stdin || c->stdin_data) && make_pipe(inp) < 0)
		return -1;
	if ((c->want_stdout || c->capture) && make_pipe(outp) < 0)
		return -1;
	if (c->capture && !c->merge_err && make_pipe(errp) < 0)
		return -1;
	if (c->no_stdin && inp[0] < 0)
		null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	/* made here: the child only makes system calls */
	if (c->cell)
		cell_environ(&envp, c->cell, &c->env);

	fflush(NULL);
	c->start_ns = now_ns();
	c->pid = fork();
	if (c->pid < 0) {
		strvec_clear(&envp);
		return error_errno("unable to fork '%s'", c->args.v[0]);
	}
	if (!c->pid) {
		int out_fd = outp[1];

		if (out_fd < 0 && c->quiet)
			out_fd = 2;
		child_exec(c, inp[0] >= 0 ? inp[0] : null_fd, out_fd,
			   errp[1] >= 0 ? errp[1] :
			   (c->merge_err && outp[1] >= 0 ? outp[1] : -1),
			   !c->cell ? NULL : envp.v ? (char **)envp.v : no_env);
	}
	strvec_clear(&envp);
	if (!c->same_group)
		setpgid(c->pid, c->pid);  /* no race with the child's own call */
	track(c->pid);
	if (null_fd >= 0)
		close(null_fd);
	if (inp[0] >= 0)
		close(inp[0]);
	if (outp[1] >= 0)
		close(outp[1]);
	if (errp[1] >= 0)
		close(errp[1]);
	c->in = inp[1];
	c->out_fd = outp[0];
	c->err_fd = errp[0];
	return 0;
}

static int remaining_ms(const struct child *c, int timeout_ms)
{
	long long left;

	if (timeout_ms <= 0)
		return -1;
	left = timeout_ms - (now_ns() - c->start_ns) / 1000000;
	return left > 0 ? (int)left : 0;
}

void kill_child(struct child *c)
{
	if (c->pid <= 0)
		return;
	kill(c->same_group ? c->pid : -c->pid, SIGKILL);
	while (waitpid(c->pid, &c->status, 0) < 0 && errno == EINTR)
		;
	untrack(c->pid);
	c->pid = -1;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static int decode_status(struct child *c)
{
	if (c->timed_out)
		return 124;
	if (WIFSIGNALED(c->status))
		return 128 + WTERMSIG(c->status);
	return WEXITSTATUS(c->status);
}

/* Waits for the child to exit, killing its group at the deadline. */
static int wait_child(struct child *c, int timeout_ms)
{
	for (;;) {
		pid_t r = waitpid(c->pid, &c->status, WNOHANG);
		int left;

		if (r == c->pid)
			break;
		if (r < 0 && errno != EINTR) {
			untrack(c->pid);
			c->pid = -1;
			return error_errno("waitpid failed");
		}
		left = remaining_ms(c, timeout_ms);
		if (left == 0) {
			c->timed_out = 1;
			kill_child(c);
			return decode_status(c);
		}
		usleep(2000);
	}
	untrack(c->pid);
	c->pid = -1;
	return decode_status(c);
}

/* Moves data between our buffers and the child's pipes until both output
 * pipes close or the deadline passes. */
static void pump(struct child *c, int timeout_ms)
{
	size_t written = 0;
	long long last_tick = now_ns();

	if (c->in >= 0 && !c->stdin_len)
		close_fd(&c->in);
	while (c->out_fd >= 0 || c->err_fd >= 0 || c->in >= 0) {
		struct pollfd p[3];
		int n = 0, left = remaining_ms(c, timeout_ms);

		if (left == 0) {
			c->timed_out = 1;
			kill_child(c);
			break;
		}
		if (c->out_fd >= 0)
			p[n++] = (struct pollfd){ c->out_fd, POLLIN, 0 };
		if (c->err_fd >= 0)
			p[n++] = (struct pollfd){ c->err_fd, POLLIN, 0 };
		if (c->in >= 0)
			p[n++] = (struct pollfd){ c->in, POLLOUT, 0 };
		if (poll(p, n, left < 0 || left > 200 ? 200 : left) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (c->tick && now_ns() - last_tick > 200000000LL) {
			c->tick(c->tick_data);
			last_tick = now_ns();
		}
		for (int i = 0; i < n; i++) {
			char buf[8192];
			ssize_t k;

			if (!p[i].revents)
				continue;
			if (p[i].fd == c->in) {
				k = write(c->in, c->stdin_data + written,
					  c->stdin_len - written);
				if (k > 0)
					written += k;
				if (k < 0 || written == c->stdin_len)
					close_fd(&c->in);
				continue;
			}
			k = read(p[i].fd, buf, sizeof(buf));
			if (k > 0)
				strbuf_add(p[i].fd == c->out_fd ? &c->out :
					   &c->err, buf, k);
			else if (k == 0 || errno != EINTR)
				close_fd(p[i].fd == c->out_fd ? &c->out_fd :
					 &c->err_fd);
		}
	}
	close_fd(&c->in);
	close_fd(&c->out_fd);
	close_fd(&c->err_fd);
}

int run_child(struct child *c)
{
	c->timed_out = 0;
	if (c->stdin_data)
		c->stdin_len = c->stdin_len ? c->stdin_len :
			strlen(c->stdin_data);
	if (start_child(c) < 0)
		return -1;
	pump(c, c->timeout_ms);
	if (c->pid < 0)
		return decode_status(c);
	return wait_child(c, c->timeout_ms);
}

int finish_child(struct child *c, int timeout_ms)
{
	close_fd(&c->in);
	close_fd(&c->out_fd);
	close_fd(&c->err_fd);
	if (c->pid <= 0)
		return decode_status(c);
	c->start_ns = now_ns();
	return wait_child(c, timeout_ms);
}

int child_poll(struct child *c)
{
	pid_t r;

	if (c->pid <= 0)
		return decode_status(c);
	r = waitpid(c->pid, &c->status, WNOHANG);
	if (r == 0 || (r < 0 && errno == EINTR))
		return CHILD_RUNNING;
	untrack(c->pid);
	c->pid = -1;
	if (r < 0)
		return error_errno("waitpid failed");
	return decode_status(c);
}

void child_release(struct child *c)
{
	if (c->pid > 0)
		kill_child(c);
	close_fd(&c->in);
	close_fd(&c->out_fd);
	close_fd(&c->err_fd);
	strvec_clear(&c->args);
	strvec_clear(&c->env);
	strbuf_release(&c->out);
	strbuf_release(&c->err);
}

void child_describe(const struct child *c, int status, char *buf, size_t n)
{
	if (c->timed_out)
		snprintf(buf, n, "timed out after %.1f s",
			 c->timeout_ms / 1000.0);
	else if (status > 128 && status < 128 + 65)
		snprintf(buf, n, "was killed by signal %d (%s)", status - 128,
			 strsignal(status - 128));
	else if (status < 0)
		snprintf(buf, n, "could not be started");
	else
		snprintf(buf, n, "exited with %d", status);
}
