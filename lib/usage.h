/*
 * usage.h: messages and allocation that cannot fail.
 *
 * error() prints "error: ..." to stderr and returns -1, so a caller writes
 * `return error("unable to open '%s'", path);`.  die() prints "fatal: ..."
 * and exits 3 (environment); it is for main paths only.  Messages are lower
 * case, no full stop, the thing first, the subject quoted.
 */
#ifndef USAGE_H
#define USAGE_H

#include <stddef.h>

#define AK_NORETURN __attribute__((noreturn))
#define AK_PRINTF(f, a) __attribute__((format(printf, f, a)))

int error(const char *fmt, ...) AK_PRINTF(1, 2);
void warning(const char *fmt, ...) AK_PRINTF(1, 2);
AK_NORETURN void die(const char *fmt, ...) AK_PRINTF(1, 2);
AK_NORETURN void die_errno(const char *fmt, ...) AK_PRINTF(1, 2);

/* Like error(), with ": strerror(errno)" appended. */
int error_errno(const char *fmt, ...) AK_PRINTF(1, 2);

void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);

/* Grows a to hold at least n elements of its type, doubling. */
#define ALLOC_GROW(a, n, alloc) do { \
	if ((n) > (alloc)) { \
		(alloc) = (alloc) ? (alloc) * 2 : 16; \
		if ((alloc) < (n)) \
			(alloc) = (n); \
		(a) = xrealloc((a), (alloc) * sizeof(*(a))); \
	} \
} while (0)

#define ARRAY_SIZE(x) (sizeof(x) / sizeof((x)[0]))

/* Exit codes: git-autokernel(1), EXIT STATUS. */
enum {
	EXIT_OK = 0,
	EXIT_FAIL = 1,
	EXIT_USAGE = 2,
	EXIT_ENV = 3,
	EXIT_CANNOT_TEST = 125,
};

/*
 * What a library function returns after an error message: a negative
 * code, never an exit code.  A command (bin/) maps it to its exit code,
 * most often with exit_code():
 *
 *	-1          error()'s: what was asked failed (exit 1: a candidate
 *	            whose files are unreadable, a check that failed)
 *	AK_EUSAGE   the request was wrong: a revision that names nothing, a
 *	            directory that holds no kernel (exit 2)
 *	AK_EENV     the environment: no device, toolchain missing, the
 *	            repository's state (exit 3)
 *
 *	if ((rc = candidate_load(&c, spec, NULL)) < 0)
 *		return exit_code(rc);
 *
 * A function may also return a positive result of its own (1: the
 * candidate failed; a child's exit status): its header says so.
 */
enum {
	AK_EUSAGE = -2,
	AK_EENV = -3,
};

/* The exit code of a library function's return: 1, 2, 3 for -1,
 * AK_EUSAGE, AK_EENV (3 for any other negative value); 0 and positive
 * values as they are. */
int exit_code(int rc);

#endif
