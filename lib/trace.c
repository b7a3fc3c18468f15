#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include "lib/trace.h"

long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

double ms_since(long long t0)
{
	return (now_ns() - t0) / 1e6;
}

static int fd = -1;
static pthread_once_t opened = PTHREAD_ONCE_INIT;

static void open_trace(void)
{
	const char *path = getenv("AUTOKERNEL_TRACE");

	if (path && *path)
		fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC,
			  0644);
}

void trace(const char *who, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n, m;

	pthread_once(&opened, open_trace);
	if (fd < 0)
		return;
	n = snprintf(line, sizeof(line), "%.6f %d %.64s: ", now_ns() / 1e9,
		     (int)getpid(), who);
	va_start(ap, fmt);
	m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	n += m > 0 ? m : 0;
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	/* one write() of a line under PIPE_BUF: lines of the tool and its
	 * runner never interleave within a line */
	if (write(fd, line, (size_t)n) < 0)
		return;
}

void phase(const char *fmt, ...)
{
	const char *path = getenv("AUTOKERNEL_PHASE");
	char line[256];
	va_list ap;
	int n, f;

	if (!path || !*path)
		return;
	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if (n >= (int)sizeof(line))
		n = (int)sizeof(line) - 1;
	f = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (f < 0)
		return;
	if (write(f, line, (size_t)n) < 0)
		n = 0;
	close(f);
}
