#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/usage.h"

static void vreport(const char *prefix, const char *fmt, va_list ap,
		    const char *suffix)
{
	fflush(stdout);
	fputs(prefix, stderr);
	vfprintf(stderr, fmt, ap);
	if (suffix)
		fprintf(stderr, ": %s", suffix);
	fputc('\n', stderr);
}

int error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreport("error: ", fmt, ap, NULL);
	va_end(ap);
	return -1;
}

int error_errno(const char *fmt, ...)
{
	const char *why = strerror(errno);
	va_list ap;

	va_start(ap, fmt);
	vreport("error: ", fmt, ap, why);
	va_end(ap);
	return -1;
}

void warning(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreport("warning: ", fmt, ap, NULL);
	va_end(ap);
}

void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreport("fatal: ", fmt, ap, NULL);
	va_end(ap);
	exit(EXIT_ENV);
}

void die_errno(const char *fmt, ...)
{
	const char *why = strerror(errno);
	va_list ap;

	va_start(ap, fmt);
	vreport("fatal: ", fmt, ap, why);
	va_end(ap);
	exit(EXIT_ENV);
}

int exit_code(int rc)
{
	switch (rc) {
	case -1:
		return EXIT_FAIL;
	case AK_EUSAGE:
		return EXIT_USAGE;
	case AK_EENV:
		return EXIT_ENV;
	default:
		return rc < 0 ? EXIT_ENV : rc;
	}
}

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p)
		die("out of memory allocating %zu bytes", n);
	return p;
}

void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);

	if (!p)
		die("out of memory allocating %zu x %zu bytes", n, size);
	return p;
}

void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		die("out of memory allocating %zu bytes", n);
	return p;
}

char *xstrdup(const char *s)
{
	return xstrndup(s, strlen(s));
}

char *xstrndup(const char *s, size_t n)
{
	size_t len = strnlen(s, n);
	char *p = xmalloc(len + 1);

	memcpy(p, s, len);
	p[len] = '\0';
	return p;
}
