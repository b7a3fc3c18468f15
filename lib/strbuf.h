/*
 * strbuf.h: a growable, always NUL-terminated string.
 *
 *	struct strbuf sb = STRBUF_INIT;
 *	strbuf_addf(&sb, "%s/%s", dir, name);
 *	use(sb.buf);
 *	strbuf_release(&sb);
 *
 * sb.buf is never NULL (it points at a static "" until something is added);
 * strbuf_detach() hands the buffer to the caller, who free()s it.
 */
#ifndef STRBUF_H
#define STRBUF_H

#include <stdarg.h>
#include <stddef.h>
#include "lib/usage.h"

struct strbuf {
	size_t alloc, len;
	char *buf;
};

extern char strbuf_slopbuf[];
#define STRBUF_INIT { 0, 0, strbuf_slopbuf }

void strbuf_init(struct strbuf *sb, size_t hint);
void strbuf_release(struct strbuf *sb);
char *strbuf_detach(struct strbuf *sb, size_t *len);
void strbuf_grow(struct strbuf *sb, size_t extra);
void strbuf_setlen(struct strbuf *sb, size_t len);
#define strbuf_reset(sb) strbuf_setlen((sb), 0)

void strbuf_add(struct strbuf *sb, const void *data, size_t len);
void strbuf_addstr(struct strbuf *sb, const char *s);
#define strbuf_addbuf(sb, other) strbuf_add((sb), (other)->buf, (other)->len)
void strbuf_addch(struct strbuf *sb, int c);
void strbuf_addf(struct strbuf *sb, const char *fmt, ...) AK_PRINTF(2, 3);
void strbuf_vaddf(struct strbuf *sb, const char *fmt, va_list ap);
void strbuf_trim(struct strbuf *sb);
void strbuf_insert_front(struct strbuf *sb, const char *s);
/* Adds s with every line prefixed by prefix. */
void strbuf_add_indented(struct strbuf *sb, const char *s, const char *prefix);

/* Reads a whole file or fd; -1 on error (errno set), else bytes read. */
long strbuf_read_file(struct strbuf *sb, const char *path);
long strbuf_read_fd(struct strbuf *sb, int fd);
/* Writes a file atomically (temp file + rename); 0 or error(). */
int write_file_atomic(const char *path, const void *data, size_t len);

/* Every occurrence of from in sb replaced by to. */
void strbuf_replace(struct strbuf *sb, const char *from, const char *to);

/* The first n lines of s (all of it if fewer), for compiler output. */
void strbuf_add_head_lines(struct strbuf *sb, const char *s, int n);

/* "5%", "5" or "0.05" -> 0.05: a plain number of 1 or more is taken as a
 * percentage.  0, or -1 (no message) when s is not one. */
int parse_fraction(const char *s, double *out);

int starts_with(const char *s, const char *prefix);
int ends_with(const char *s, const char *suffix);

#endif
