/*
 * trace.h: where a judgement's time goes, for work on the harness's own
 * speed.  With AUTOKERNEL_TRACE=FILE in the environment, the tool and its
 * runner append timestamped lines to FILE (the runner inherits the
 * variable); without it trace() costs a getenv() once per process.
 *
 *	long long t0 = now_ns();
 *	...
 *	trace("verify", "case %s: %.1f ms", shape, (now_ns() - t0) / 1e6);
 *
 * A line is "SECONDS PID WHO: WHAT", SECONDS on the monotonic clock that
 * every process shares, so the lines of the tool, its runners and the
 * workers of `run --workers` interleave in time order, told apart by PID.
 */
#ifndef TRACE_H
#define TRACE_H

#include "lib/usage.h"

/* Nanoseconds on CLOCK_MONOTONIC. */
long long now_ns(void);

/* Milliseconds since t0, a now_ns() reading. */
double ms_since(long long t0);

void trace(const char *who, const char *fmt, ...) AK_PRINTF(2, 3);

/*
 * The judgement's phase ("stage 2/5 shape sweep", "benchmark") for a
 * `run` that shows it on its progress line: with AUTOKERNEL_PHASE=FILE
 * in the environment (run sets it for the commit it makes), each call
 * replaces FILE's one line; without it, nothing.
 */
void phase(const char *fmt, ...) AK_PRINTF(1, 2);

#endif
