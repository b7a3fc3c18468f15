#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "lib/cell.h"
#include "lib/paths.h"
#include "lib/python.h"
#include "lib/tempdir.h"
#include "lib/toolchain.h"
#include "verify/client.h"
#include "verify/runners.h"

/* $TMPDIR, or /tmp. */
static const char *tmp_dir(void)
{
	const char *dir = getenv("TMPDIR");

	return dir && *dir ? dir : "/tmp";
}

/* A file for the runner in dir. */
static int tmp_file_in(char *path, size_t n, const char *what,
		       const char *dir)
{
	int fd;

	snprintf(path, n, "%s/autokernel-%s-XXXXXX", dir, what);
	fd = mkostemp(path, O_CLOEXEC);
	if (fd < 0)
		return error_errno("unable to create a file in '%s'", dir);
	return fd;
}

/* The tensors' file: in /dev/shm unless told otherwise, else in the
 * runner's scratch directory. */
static int tensors_file(struct runner *r)
{
	int shm = !access("/dev/shm", W_OK) && !getenv("AUTOKERNEL_NO_DEVSHM");

	return tmp_file_in(r->shm_path, sizeof(r->shm_path), "tensors",
			   shm ? "/dev/shm" : r->scratch);
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
	/* a verdict, and so a note and a prompt, holds a bounded tail */
	if (sb.buf + sb.len - tail > 2048)
		tail = sb.buf + sb.len - 2048;
	if (*tail == '\n')
		tail++;
	strbuf_addstr(why, "\n");
	strbuf_add_indented(why, tail, "    ");
	strbuf_release(&sb);
}

/* The runner's scratch directory (its TMPDIR and HOME, where its stderr
 * goes) and the tensors' file, made before it starts: its cell names
 * them. */
static int runner_files(struct runner *r)
{
	int fd;

	if (!r->scratch && !(r->scratch = tempdir_make(tmp_dir())))
		return -1;
	if (!r->err_path[0]) {
		snprintf(r->err_path, sizeof(r->err_path), "%s/stderr",
			 r->scratch);
		fd = open(r->err_path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
		if (fd < 0)
			return error_errno("unable to create '%s'",
					   r->err_path);
		close(fd);
	}
	if (r->shm_fd < 0 && (r->shm_fd = tensors_file(r)) < 0)
		return -1;
	return 0;
}

/*
 * The runner's cell: it reads the toolchain (the GPU runtime's libraries
 * are there; for the Python runner, triton's and PyTorch's, the
 * interpreter's), its own directory and the built kernels, opens the GPU
 * (not beside a host kernel), and writes its scratch directory and the
 * tensors' file (and the trace file, when tracing; for the Python
 * runner, Triton's cache, and for PyTorch's, Inductor's).
 */
static void runner_cell(struct cell *cell, struct runner *r)
{
	struct strbuf path = STRBUF_INIT;
	const char *trace = getenv("AUTOKERNEL_TRACE");
	int fd;

	cell_system(cell);
	cell_toolchain(cell, backend_compiler(runner_is_python(r->backend) ?
					      "triton" : r->backend));
	if (runner_on_gpu(r->backend))
		cell_gpu(cell);
	cell_read(cell, ak_libexecdir());
	strbuf_addf(&path, "%s/../lib", ak_libexecdir());
	cell_read(cell, path.buf);
	strbuf_reset(&path);
	/* made now: the first build of this cache comes after the start */
	strbuf_addf(&path, "%s/build", ak_cachedir());
	mkdir_p(path.buf);
	cell_read(cell, path.buf);
	if (runner_is_python(r->backend)) {
		/* the runner's own modules, and Triton's JIT cache, where
		 * it compiles the kernel (verify/runners.c sets it) */
		strbuf_reset(&path);
		strbuf_addf(&path, "%s/python", ak_datadir());
		cell_read(cell, path.buf);
		mkdir_p(triton_cache_dir());
		cell_write(cell, triton_cache_dir());
		if (python_torch_site())
			cell_read(cell, python_torch_site());
		cell_path_list(cell, getenv("PYTHONPATH"));
	}
	if (runner_is_python(r->backend) && strcmp(r->backend, "triton")) {
		/* torch.compile's: Inductor writes its code there */
		mkdir_p(inductor_cache_dir());
		cell_write(cell, inductor_cache_dir());
	}
	cell_scratch(cell, r->scratch);
	cell_write(cell, r->shm_path);
	if (trace && *trace) {
		fd = open(trace, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC,
			  0644);
		if (fd >= 0)
			close(fd);
		cell_write(cell, trace);
	}
	strbuf_release(&path);
}

static int spawn(struct runner *r, struct strbuf *why)
{
	struct cell cell = CELL_INIT;
	int ret = 0;

	child_release(&r->c);
	r->c = (struct child)CHILD_INIT;
	if (runner_command(&r->c.args, &r->c.env, r->backend, why) < 0)
		return -1;
	r->c.want_stdin = 1;
	r->c.want_stdout = 1;
	if (runner_files(r) < 0) {
		strbuf_addf(why, "cannot start the %s runner", r->backend);
		return -1;
	}
	/* The runner's stderr (kernels' printf, sanitizer reports) goes to
	 * a file whose tail explains a crash. */
	strvec_pushf(&r->c.env, "AK_RUNNER_STDERR=%s", r->err_path);
	if (cell_enabled()) {
		runner_cell(&cell, r);
		r->c.cell = &cell;
	}
	if (start_child(&r->c) < 0) {
		strbuf_addf(why, "cannot start the %s runner", r->backend);
		ret = -1;
	} else {
		r->alive = 1;
	}
	r->c.cell = NULL;
	cell_release(&cell);
	return ret;
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
		return AK_EENV;
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
	tempdir_remove(r->scratch);
	free(r->scratch);
	r->scratch = NULL;
	r->shm = NULL;
	r->shm_fd = -1;
	r->shm_path[0] = r->err_path[0] = '\0';
	json_decref(r->hello);
	r->hello = NULL;
	strbuf_release(&r->rbuf);
}

void runner_recycle(struct runner *r)
{
	if (r->alive)
		finish_child(&r->c, 5000);
	r->alive = 0;
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
		size >> 20, strerror(e), tmp_dir());
	close(r->shm_fd);
	unlink(r->shm_path);
	/* in the runner's scratch directory, which its cell writes */
	r->shm_fd = tmp_file_in(r->shm_path, sizeof(r->shm_path), "tensors",
				r->scratch);
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
	if (r->shm_fd < 0 && (!r->scratch || (r->shm_fd = tensors_file(r)) < 0))
		die("cannot create the tensor exchange file");
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

/* Reads one line within the deadline; 0, -1 on EOF, -2 on timeout.  What
 * follows the line stays in r->rbuf for the next. */
static int read_line(struct runner *r, struct strbuf *line, long long deadline)
{
	strbuf_reset(line);
	for (;;) {
		char *nl = memchr(r->rbuf.buf, '\n', r->rbuf.len);
		long long left = (deadline - now_ns()) / 1000000;
		struct pollfd p = { r->c.out_fd, POLLIN, 0 };
		char buf[4096];
		ssize_t k;

		if (nl) {
			size_t n = (size_t)(nl - r->rbuf.buf);

			strbuf_add(line, r->rbuf.buf, n);
			memmove(r->rbuf.buf, nl + 1, r->rbuf.len - n - 1);
			strbuf_setlen(&r->rbuf, r->rbuf.len - n - 1);
			return 0;
		}
		if (left <= 0)
			return -2;
		if (poll(&p, 1, left > 1000 ? 1000 : (int)left) <= 0) {
			if (run_interrupted)
				return -1;
			continue;
		}
		k = read(r->c.out_fd, buf, sizeof(buf));
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		strbuf_add(&r->rbuf, buf, (size_t)k);
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

/* One JSON line to the runner; 0, or -1 when it is gone. */
static int send_json(struct runner *r, json_t *msg)
{
	char *text = json_dumps(msg, JSON_COMPACT);
	int rc = 0;

	if (!text || write_line(r->c.in, text, strlen(text)) < 0 ||
	    write_line(r->c.in, "\n", 1) < 0)
		rc = -1;
	free(text);
	return rc;
}

json_t *runner_next(struct runner *r, int timeout_ms, struct strbuf *why)
{
	struct strbuf line = STRBUF_INIT;
	json_error_t jerr;
	json_t *res = NULL;
	int how = read_line(r, &line, now_ns() + (long long)timeout_ms *
			    1000000);

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

int runner_reply(struct runner *r, json_t *msg, struct strbuf *why)
{
	if (send_json(r, msg) == 0)
		return 0;
	describe_death(r, -1, why, 0);
	return -1;
}

json_t *runner_request(struct runner *r, json_t *req, int timeout_ms,
		       struct strbuf *why)
{
	if (!r->alive && respawn(r, why) < 0)
		return NULL;
	/* Truncate the stderr log: a crash report shows this call's output. */
	if (r->err_path[0])
		truncate(r->err_path, 0);
	strbuf_reset(&r->rbuf);
	if (send_json(r, req) < 0) {
		describe_death(r, -1, why, timeout_ms);
		return NULL;
	}
	return runner_next(r, timeout_ms, why);
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
