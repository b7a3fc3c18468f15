/*
 * tap.h: the C unit tests' TAP output.  One per test program:
 *
 *	#include "tests/tap.h"
 *	ok(x == 1, "x is %d", x);       // "ok N - x is 1" or "not ok N - ..."
 *	return tap_done();              // prints the plan; 1 if any failed
 */
#ifndef TAP_H
#define TAP_H

#include <stdarg.h>
#include <stdio.h>
#include "lib/usage.h"

static int tests, failed;

static int ok(int cond, const char *fmt, ...) AK_PRINTF(2, 3);
static int ok(int cond, const char *fmt, ...)
{
	va_list ap;

	tests++;
	printf("%sok %d - ", cond ? "" : "not ", tests);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	if (!cond)
		failed++;
	return cond;
}

static inline int tap_done(void)
{
	printf("1..%d\n", tests);
	return failed ? 1 : 0;
}

#endif
