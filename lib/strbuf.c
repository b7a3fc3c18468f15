#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "lib/strbuf.h"

char strbuf_slopbuf[1];

void strbuf_init(struct strbuf *sb, size_t hint)
{
	sb->alloc = sb->len = 0;
	sb->buf = strbuf_slopbuf;
	if (hint)
		strbuf_grow(sb, hint);
}

void strbuf_release(struct strbuf *sb)
{
	if (sb->alloc)
		free(sb->buf);
	strbuf_init(sb, 0);
}

char *strbuf_detach(struct strbuf *sb, size_t *len)
{
	char *res;

	strbuf_grow(sb, 0);
	res = sb->buf;
	if (len)
		*len = sb->len;
	strbuf_init(sb, 0);
	return res;
}

void strbuf_grow(struct strbuf *sb, size_t extra)
{
	size_t want = sb->len + extra + 1;

	if (want <= sb->alloc)
		return;
	if (!sb->alloc)
		sb->buf = NULL;
	sb->alloc = sb->alloc * 3 / 2 > want ? sb->alloc * 3 / 2 : want;
	sb->buf = xrealloc(sb->buf, sb->alloc);
	if (!sb->len)
		sb->buf[0] = '\0';
}

void strbuf_setlen(struct strbuf *sb, size_t len)
{
	if (!sb->alloc) {
		if (len)
			die("strbuf_setlen beyond an empty buffer");
		return;
	}
	sb->len = len;
	sb->buf[len] = '\0';
}

void strbuf_add(struct strbuf *sb, const void *data, size_t len)
{
	strbuf_grow(sb, len);
	memcpy(sb->buf + sb->len, data, len);
	sb->len += len;
	sb->buf[sb->len] = '\0';
}

void strbuf_addstr(struct strbuf *sb, const char *s)
{
	strbuf_add(sb, s, strlen(s));
}

void strbuf_addch(struct strbuf *sb, int c)
{
	char ch = (char)c;

	strbuf_add(sb, &ch, 1);
}

void strbuf_vaddf(struct strbuf *sb, const char *fmt, va_list ap)
{
	va_list cp;
	int n;

	strbuf_grow(sb, 64);
	va_copy(cp, ap);
	n = vsnprintf(sb->buf + sb->len, sb->alloc - sb->len, fmt, cp);
	va_end(cp);
	if (n < 0)
		die("vsnprintf failed");
	if ((size_t)n >= sb->alloc - sb->len) {
		strbuf_grow(sb, n);
		n = vsnprintf(sb->buf + sb->len, sb->alloc - sb->len, fmt, ap);
	}
	sb->len += n;
}

void strbuf_addf(struct strbuf *sb, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	strbuf_vaddf(sb, fmt, ap);
	va_end(ap);
}

void strbuf_trim(struct strbuf *sb)
{
	size_t start = 0, end = sb->len;

	while (end > 0 && strchr(" \t\r\n", sb->buf[end - 1]))
		end--;
	while (start < end && strchr(" \t\r\n", sb->buf[start]))
		start++;
	if (!sb->alloc)
		return;
	memmove(sb->buf, sb->buf + start, end - start);
	strbuf_setlen(sb, end - start);
}

void strbuf_insert_front(struct strbuf *sb, const char *s)
{
	size_t n = strlen(s);

	strbuf_grow(sb, n);
	memmove(sb->buf + n, sb->buf, sb->len + 1);
	memcpy(sb->buf, s, n);
	sb->len += n;
}

void strbuf_add_indented(struct strbuf *sb, const char *s, const char *prefix)
{
	while (*s) {
		const char *eol = strchrnul(s, '\n');

		strbuf_addstr(sb, prefix);
		strbuf_add(sb, s, eol - s);
		strbuf_addch(sb, '\n');
		s = *eol ? eol + 1 : eol;
	}
}

void strbuf_add_head_lines(struct strbuf *sb, const char *s, int n)
{
	const char *p = s;

	while (*p && n > 0) {
		const char *eol = strchrnul(p, '\n');

		p = *eol ? eol + 1 : eol;
		n--;
	}
	strbuf_add(sb, s, p - s);
}

long strbuf_read_fd(struct strbuf *sb, int fd)
{
	size_t start = sb->len;

	for (;;) {
		ssize_t n;

		strbuf_grow(sb, 8192);
		n = read(fd, sb->buf + sb->len, sb->alloc - sb->len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		sb->len += n;
		sb->buf[sb->len] = '\0';
	}
	return (long)(sb->len - start);
}

long strbuf_read_file(struct strbuf *sb, const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	long n;
	int saved;

	if (fd < 0)
		return -1;
	n = strbuf_read_fd(sb, fd);
	saved = errno;
	close(fd);
	errno = saved;
	return n;
}

static int write_all(int fd, const char *p, size_t len)
{
	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		p += n;
		len -= n;
	}
	return 0;
}

int write_file_atomic(const char *path, const void *data, size_t len)
{
	struct strbuf tmp = STRBUF_INIT;
	int fd, ret = 0;

	strbuf_addf(&tmp, "%s.tmp.%ld", path, (long)getpid());
	fd = open(tmp.buf, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		ret = error_errno("unable to create '%s'", tmp.buf);
		goto cleanup;
	}
	if (write_all(fd, data, len) < 0 || fsync(fd) < 0) {
		ret = error_errno("unable to write '%s'", tmp.buf);
		close(fd);
		unlink(tmp.buf);
		goto cleanup;
	}
	close(fd);
	if (rename(tmp.buf, path) < 0) {
		ret = error_errno("unable to rename '%s'", tmp.buf);
		unlink(tmp.buf);
	}
cleanup:
	strbuf_release(&tmp);
	return ret;
}

int starts_with(const char *s, const char *prefix)
{
	return !strncmp(s, prefix, strlen(prefix));
}

int ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);

	return a >= b && !strcmp(s + a - b, suffix);
}

int parse_fraction(const char *s, double *out)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || v < 0 || (*end && strcmp(end, "%")))
		return -1;
	*out = *end == '%' || v >= 1 ? v / 100 : v;
	return 0;
}

void strbuf_replace(struct strbuf *sb, const char *from, const char *to)
{
	struct strbuf out = STRBUF_INIT;
	size_t flen = strlen(from);
	const char *p = sb->buf, *q;

	if (!flen)
		return;
	while ((q = strstr(p, from))) {
		strbuf_add(&out, p, q - p);
		strbuf_addstr(&out, to);
		p = q + flen;
	}
	strbuf_addstr(&out, p);
	strbuf_release(sb);
	*sb = out;
}
