#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "lib/paths.h"
#include "verify/client.h"
#include "verify/runners.h"

/* A file for the runner: in /dev/shm unless told otherwise (or unless
 * in_shm is 0), else in $TMPDIR or /tmp. */
static int tmp_file_in(char *path, size_t n, const char *what, int in_shm)
{
	const char *dir = getenv("TMPDIR");
	int fd;

	if (in_shm && !access("/dev/shm", W_OK) &&
	    !getenv("AUTOKERNEL_NO_DEVSHM"))
		dir = "/dev/shm";
	snprintf(path, n, "%s/autokernel-%s-XXXXXX", dir && *dir ? dir : "/tmp",
		 what);
	fd = mkostemp(path, O_CLOEXEC);
	if (fd < 0)
		return error_errno("unable to create a file in '%s'",
				   dir && *dir ? dir : "/tmp");
	return fd;
}

static int tmp_file(char *path, size_t n, const char *what)
{
	return tmp_file_in(path, n, what, 1);
}

static void read_err_tail(struct runner *r, struct strbuf *why)
{
	struct strbuf sb = STRBUF_INIT;
	const char *tail;
	int lines = 0;

	if (strbuf_read_file(&sb, r->err_path) <= 0) {
		strbuf_release(&sb);
		return;
	}
	strbuf_trim(&sb);
	tail = sb.buf + sb.len;
	while (tail > sb.buf && lines < 12)
		if (*--tail == '\n')
			lines++;
	if (*tail == '\n')
		tail++;
	strbuf_addstr(why, "\n");
	strbuf_add_indented(why, tail, "    ");
	strbuf_release(&sb);
}

static int spawn(struct runner *r, struct strbuf *why)
{
	int err_fd;

	child_release(&r->c);
	r->c = (struct child)CHILD_INIT;
	if (runner_command(&r->c.args, &r->c.env, r->backend, why) < 0)
		return -1;
	r->c.want_stdin = 1;
	r->c.want_stdout = 1;
	if (!r->err_path[0]) {
		err_fd = tmp_file(r->err_path, sizeof(r->err_path), "stderr");
		if (err_fd < 0)
			return -1;
		close(err_fd);
	}
	/* The runner's stderr (kernels' printf, sanitizer reports) goes to
	 * a file whose tail explains a crash. */
	strvec_pushf(&r->c.env, "AK_RUNNER_STDERR=%s", r->err_path);
	if (start_child(&r->c) < 0) {
		strbuf_addf(why, "cannot start the %s runner", r->backend);
		return -1;
	}
	r->alive = 1;
	return 0;
}

int runner_spawn(struct runner *r, const char *backend, int timeout_ms,
		 struct strbuf *why)
{
	snprintf(r->backend, sizeof(r->backend), "%s", backend);
	r->timeout_ms = timeout_ms;
	return spawn(r, why);
}

int runner_start(struct runner *r, const char *backend, int timeout_ms,
		 struct strbuf *why)
{
	if (runner_spawn(r, backend, timeout_ms, why) < 0)
		return -1;
	return runner_hello(r, why);
}

int runner_hello(struct runner *r, struct strbuf *why)
{
	json_t *req, *res;

	req = json_pack("{s:s}", "req", "hello");
	res = runner_request(r, req, 60000, why);
	json_decref(req);
	if (!res)
		return -1;
	if (!json_is_true(json_object_get(res, "ok"))) {
		strbuf_addstr(why, json_string_value(json_object_get(res, "error")) ?
			      json_string_value(json_object_get(res, "error")) :
			      "the runner refused to start");
		json_decref(res);
		return -3;
	}
	json_decref(r->hello);
	r->hello = res;
	return 0;
}

void runner_stop(struct runner *r)
{
	/* Waited for: the next runner may need the device this one holds
	 * (a GPU in exclusive-process mode), though its teardown costs a
	 * tenth of a second on an H200. */
	if (r->alive)
		finish_child(&r->c, 5000);
	child_release(&r->c);
	r->alive = 0;
	for (int i = 0; i < RUNNER_SLOTS; i++) {
		free(r->slot_path[i]);
		r->slot_path[i] = NULL;
	}
	if (r->shm)
		munmap(r->shm, r->shm_size);
	if (r->shm_fd >= 0)
		close(r->shm_fd);
	if (r->shm_path[0])
		unlink(r->shm_path);
	if (r->err_path[0])
		unlink(r->err_path);
	r->shm = NULL;
	r->shm_fd = -1;
	r->shm_path[0] = r->err_path[0] = '\0';
	json_decref(r->hello);
	r->hello = NULL;
}

/*
 * The tensors' file at size bytes.  In /dev/shm its memory is reserved
 * now: a full /dev/shm (64 MB in a default Docker container) is found
 * here rather than by a SIGBUS on some later write, and the file moves
 * to $TMPDIR.  Reserved pages are also cheaper for both processes to map.
 */
static void shm_size_file(struct runner *r, size_t size)
{
	int in_shm = !strncmp(r->shm_path, "/dev/shm/", 9), e;

	if (ftruncate(r->shm_fd, (off_t)size) < 0)
		die_errno("unable to size '%s' to %zu bytes", r->shm_path,
			  size);
	if (!in_shm || !(e = posix_fallocate(r->shm_fd, 0, (off_t)size)))
		return;
	warning("no room for %zu MB of tensors in /dev/shm (%s); using %s",
		size >> 20, strerror(e), getenv("TMPDIR") && *getenv("TMPDIR") ?
		getenv("TMPDIR") : "/tmp");
	close(r->shm_fd);
	unlink(r->shm_path);
	r->shm_fd = tmp_file_in(r->shm_path, sizeof(r->shm_path), "tensors", 0);
	if (r->shm_fd < 0)
		die("cannot create the tensor exchange file");
	if (ftruncate(r->shm_fd, (off_t)size) < 0)
		die_errno("unable to size '%s' to %zu bytes", r->shm_path,
			  size);
}

void *runner_shm(struct runner *r, size_t size)
{
	size = (size + 4095) & ~(size_t)4095;
	if (r->shm && size <= r->shm_size)
		return r->shm;
	if (r->shm)
		munmap(r->shm, r->shm_size);
	if (r->shm_fd < 0) {
		r->shm_fd = tmp_file(r->shm_path, sizeof(r->shm_path), "tensors");
		if (r->shm_fd < 0)
			die("cannot create the tensor exchange file");
	}
	shm_size_file(r, size);
	r->shm = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED |
		      MAP_POPULATE, r->shm_fd, 0);
	if (r->shm == MAP_FAILED)
		die_errno("unable to map '%s'", r->shm_path);
	r->shm_size = size;
	return r->shm;
}

static int write_line(int fd, const char *s, size_t n)
{
	while (n) {
		ssize_t k = write(fd, s, n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -1;
		s += k;
		n -= k;
	}
	return 0;
}

/* Reads one line within the deadline; 0, -1 on EOF, -2 on timeout. */
static int read_line(struct runner *r, struct strbuf *line, long long deadline)
{
	strbuf_reset(line);
	for (;;) {
		long long left = (deadline - now_ns()) / 1000000;
		struct pollfd p = { r->c.out_fd, POLLIN, 0 };
		char ch;
		ssize_t k;

		if (left <= 0)
			return -2;
		if (poll(&p, 1, left > 1000 ? 1000 : (int)left) <= 0) {
			if (run_interrupted)
				return -1;
			continue;
		}
		k = read(r->c.out_fd, &ch, 1);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		if (ch == '\n')
			return 0;
		strbuf_addch(line, ch);
	}
}

static void describe_death(struct runner *r, int how, struct strbuf *why,
			   int timeout_ms)
{
	char desc[128];
	int rc;

	if (how == -2) {
		kill_child(&r->c);
		strbuf_addf(why, "timed out after %.1f s (the kernel hung or "
			    "ran too long; autokernel.timeout)", timeout_ms / 1e3);
	} else {
		rc = finish_child(&r->c, 5000);
		child_describe(&r->c, rc, desc, sizeof(desc));
		strbuf_addf(why, "the %s runner crashed: it %s", r->backend,
			    desc);
	}
	r->alive = 0;
	read_err_tail(r, why);
}

static int respawn(struct runner *r, struct strbuf *why)
{
	if (spawn(r, why) < 0)
		return -1;
	r->alive = 1;
	for (int i = 0; i < RUNNER_SLOTS; i++) {
		json_t *req, *res;

		if (!r->slot_path[i])
			continue;
		req = json_pack("{s:s,s:i,s:s}", "req", "load", "slot", i,
				"path", r->slot_path[i]);
		res = runner_request(r, req, 60000, why);
		json_decref(req);
		if (!res)
			return -1;
		json_decref(res);
	}
	return 0;
}

json_t *runner_request(struct runner *r, json_t *req, int timeout_ms,
		       struct strbuf *why)
{
	struct strbuf line = STRBUF_INIT;
	json_error_t jerr;
	json_t *res = NULL;
	char *text;
	int how;

	if (!r->alive && respawn(r, why) < 0)
		return NULL;
	/* Truncate the stderr log: a crash report shows this call's output. */
	if (r->err_path[0])
		truncate(r->err_path, 0);
	text = json_dumps(req, JSON_COMPACT);
	if (write_line(r->c.in, text, strlen(text)) < 0 ||
	    write_line(r->c.in, "\n", 1) < 0)
		how = -1;
	else
		how = read_line(r, &line, now_ns() + (long long)timeout_ms *
				1000000);
	free(text);
	if (how < 0) {
		describe_death(r, how, why, timeout_ms);
		goto cleanup;
	}
	res = json_loads(line.buf, 0, &jerr);
	if (!res) {
		strbuf_addf(why, "the %s runner answered garbage: %s",
			    r->backend, jerr.text);
		kill_child(&r->c);
		r->alive = 0;
	} else if (json_is_true(json_object_get(res, "fatal"))) {
		/* The device context is lost: the process exits by itself. */
		finish_child(&r->c, 5000);
		r->alive = 0;
	}
cleanup:
	strbuf_release(&line);
	return res;
}

int runner_load(struct runner *r, int slot, const char *so,
		struct strbuf *why)
{
	json_t *req, *res;
	int ret = 0;

	free(r->slot_path[slot]);
	r->slot_path[slot] = xstrdup(so);
	req = json_pack("{s:s,s:i,s:s}", "req", "load", "slot", slot,
			"path", so);
	res = runner_request(r, req, 60000, why);
	json_decref(req);
	if (!res)
		return -1;
	if (!json_is_true(json_object_get(res, "ok"))) {
		strbuf_addstr(why, json_string_value(json_object_get(res, "error")));
		ret = -1;
	}
	json_decref(res);
	return ret;
}
