/*
 * devlock.c: the device lock (judge/devlock.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>
#include "judge/devlock.h"
#include "lib/paths.h"

static int open_lock(const char *path)
{
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);

	if (fd < 0)
		warning("unable to open the device lock '%s': %s", path,
			strerror(errno));
	return fd;
}

static int lock_fd(int fd, int op)
{
	while (flock(fd, op) < 0)
		if (errno != EINTR)
			return -1;
	return 0;
}

int devlock_take(struct devlock *l, struct judge *j, enum devlock_mode mode)
{
	struct strbuf path = STRBUF_INIT, key = STRBUF_INIT;
	long long t0 = now_ns();
	int turn = -1, ret = -1;

	l->fd = -1;
	judge_ready(j);         /* the key is the device's, from its hello */
	judge_device_key(j, &key);
	strbuf_addf(&path, "%s/locks", ak_cachedir());
	if (mkdir_p(path.buf) < 0)
		goto cleanup;
	strbuf_addf(&path, "/%s.turn", key.buf);
	if ((turn = open_lock(path.buf)) < 0)
		goto cleanup;
	strbuf_setlen(&path, path.len - strlen(".turn"));
	strbuf_addstr(&path, ".lock");
	if ((l->fd = open_lock(path.buf)) < 0)
		goto cleanup;
	if (lock_fd(turn, LOCK_EX) < 0 ||
	    lock_fd(l->fd, mode == DEVLOCK_EXCLUSIVE ? LOCK_EX : LOCK_SH) < 0) {
		warning("unable to lock '%s': %s", path.buf, strerror(errno));
		goto cleanup;
	}
	ret = 0;
cleanup:
	if (turn >= 0)
		close(turn);    /* and with it the turnstile */
	if (ret && l->fd >= 0) {
		close(l->fd);
		l->fd = -1;
	}
	l->waited = (now_ns() - t0) / 1e9;
	l->taken = now_ns();
	l->shared = mode == DEVLOCK_SHARED;
	trace("lock", "%s %s after %.2f ms", key.buf,
	      ret ? "not taken" : l->shared ? "shared" : "exclusive",
	      l->waited * 1e3);
	strbuf_release(&path);
	strbuf_release(&key);
	return ret;
}

void devlock_release(struct devlock *l)
{
	if (l->fd >= 0) {
		close(l->fd);
		trace("lock", "%s let go after %.2f ms",
		      l->shared ? "shared" : "exclusive", ms_since(l->taken));
	}
	l->fd = -1;
}
