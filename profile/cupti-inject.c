/*
 * cupti-inject.c: libak-cupti.so, what `git autokernel profile -- CMD`
 * puts into CMD to see its kernels.
 *
 * The CUDA driver loads the library named by CUDA_INJECTION64_PATH when the
 * program initializes CUDA, and calls its InitializeInjection().  That
 * turns on CUPTI's activity records for kernels (CONCURRENT_KERNEL, which
 * unlike KERNEL does not serialize them) and for devices; CUPTI hands back
 * full buffers from its own thread, and each kernel becomes one JSON line
 * appended to $AK_CUPTI_OUT:
 *
 *	{"kind":"kernel","name":"softmax_kernel(float const*, float*, int)",
 *	 "device":0,"stream":7,"grid":[4096,1,1],"block":[256,1,1],
 *	 "start":1712,"end":9920,"corr":31}
 *
 * (times in ns; names demangled when the process has a C++ runtime, which
 * every CUDA program has).  The last buffers are flushed at exit and before
 * a cudaDeviceReset() destroys them.  The file is opened for appending and
 * written a whole number of lines at a time, so children of the program
 * that use CUDA add to it too.  Nothing is written to the program's own
 * stdout or stderr unless CUPTI itself fails.
 *
 * Kernel records are read through CUpti_ActivityKernel4: every later
 * version (10 in CUDA 13) starts with the same fields up to the name, so
 * the library works against the CUPTI of CUDA 11 to 13.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cupti.h>

#define ACTIVITY_BUF (8u << 20)
#define LINE_BUF (256u << 10)

static int out_fd = -1;
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
static char out_buf[LINE_BUF];
static size_t out_len;
static CUpti_SubscriberHandle subscriber;

typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);
static demangle_fn demangle;
static int demangle_looked;

static void out_write(const char *s, size_t n)
{
	while (n) {
		ssize_t w = write(out_fd, s, n);

		if (w <= 0)
			return;
		s += w;
		n -= (size_t)w;
	}
}

/* Under out_lock: writes what is buffered, whole lines only. */
static void out_flush(void)
{
	if (out_len && out_fd >= 0)
		out_write(out_buf, out_len);
	out_len = 0;
}

static void out_add(const char *s, size_t n)
{
	if (out_len + n > sizeof(out_buf))
		out_flush();
	if (n > sizeof(out_buf)) {
		out_write(s, n);
		return;
	}
	memcpy(out_buf + out_len, s, n);
	out_len += n;
}

/* s as a JSON string; bytes past ASCII as \u00XX, so the line stays valid */
static void add_json_string(char *dst, size_t cap, size_t *len, const char *s)
{
	size_t n = *len;

	if (n < cap)
		dst[n++] = '"';
	for (; s && *s && n + 8 < cap; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\') {
			dst[n++] = '\\';
			dst[n++] = (char)ch;
		} else if (ch < 0x20 || ch >= 0x7f) {
			n += (size_t)snprintf(dst + n, cap - n, "\\u%04x", ch);
		} else {
			dst[n++] = (char)ch;
		}
	}
	if (n < cap)
		dst[n++] = '"';
	*len = n;
}

static const char *demangled(const char *name, char **to_free)
{
	int status = -1;
	char *d;

	*to_free = NULL;
	if (!demangle_looked) {
		void *lib;

		demangle_looked = 1;
		*(void **)&demangle = dlsym(RTLD_DEFAULT, "__cxa_demangle");
		if (!demangle && (lib = dlopen("libstdc++.so.6", RTLD_LAZY)))
			*(void **)&demangle = dlsym(lib, "__cxa_demangle");
	}
	if (!demangle || !name || name[0] != '_' || name[1] != 'Z')
		return name;
	d = demangle(name, NULL, NULL, &status);
	if (status || !d) {
		free(d);
		return name;
	}
	*to_free = d;
	return d;
}

static void write_kernel(const CUpti_ActivityKernel4 *k)
{
	char line[8192], *dm;
	const char *name;
	size_t n = 0;

	if (!k->end || k->end < k->start)       /* incomplete at a forced flush */
		return;
	name = demangled(k->name, &dm);
	n = (size_t)snprintf(line, sizeof(line), "{\"kind\":\"kernel\",\"name\":");
	add_json_string(line, sizeof(line) - 256, &n, name ? name : "?");
	n += (size_t)snprintf(line + n, sizeof(line) - n,
		",\"device\":%u,\"stream\":%u,\"grid\":[%d,%d,%d],"
		"\"block\":[%d,%d,%d],\"start\":%llu,\"end\":%llu,"
		"\"corr\":%u}\n", k->deviceId, k->streamId, k->gridX, k->gridY,
		k->gridZ, k->blockX, k->blockY, k->blockZ,
		(unsigned long long)k->start, (unsigned long long)k->end,
		k->correlationId);
	free(dm);
	out_add(line, n < sizeof(line) ? n : sizeof(line) - 1);
}

static void write_device(const CUpti_ActivityDevice2 *d)
{
	char line[1024];
	size_t n;

	n = (size_t)snprintf(line, sizeof(line), "{\"kind\":\"device\","
			     "\"id\":%u,\"cc\":\"%u.%u\",\"sms\":%u,\"name\":",
			     d->id, d->computeCapabilityMajor,
			     d->computeCapabilityMinor, d->numMultiprocessors);
	add_json_string(line, sizeof(line) - 4, &n, d->name);
	n += (size_t)snprintf(line + n, sizeof(line) - n, "}\n");
	out_add(line, n);
}

static void write_error(const char *what, CUptiResult r)
{
	char line[512];
	const char *s = NULL;
	size_t n;

	cuptiGetResultString(r, &s);
	n = (size_t)snprintf(line, sizeof(line), "{\"kind\":\"error\","
			     "\"message\":\"%s: %s\"}\n", what,
			     s ? s : "unknown CUPTI error");
	pthread_mutex_lock(&out_lock);
	out_add(line, n < sizeof(line) ? n : sizeof(line) - 1);
	out_flush();
	pthread_mutex_unlock(&out_lock);
}

static void CUPTIAPI buffer_requested(uint8_t **buf, size_t *size,
				      size_t *max_records)
{
	*buf = aligned_alloc(8, ACTIVITY_BUF);
	*size = *buf ? ACTIVITY_BUF : 0;
	*max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream,
				      uint8_t *buf, size_t size, size_t valid)
{
	CUpti_Activity *rec = NULL;
	size_t dropped = 0;
	char line[128];

	(void)size;
	pthread_mutex_lock(&out_lock);
	while (valid &&
	       cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS) {
		if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
		    rec->kind == CUPTI_ACTIVITY_KIND_KERNEL)
			write_kernel((const CUpti_ActivityKernel4 *)rec);
		else if (rec->kind == CUPTI_ACTIVITY_KIND_DEVICE)
			write_device((const CUpti_ActivityDevice2 *)rec);
	}
	if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) ==
	    CUPTI_SUCCESS && dropped) {
		int n = snprintf(line, sizeof(line), "{\"kind\":\"dropped\","
				 "\"n\":%zu}\n", dropped);

		out_add(line, (size_t)n);
	}
	out_flush();
	pthread_mutex_unlock(&out_lock);
	free(buf);
}

static void flush_all(void)
{
	cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	pthread_mutex_lock(&out_lock);
	out_flush();
	pthread_mutex_unlock(&out_lock);
}

/* cudaDeviceReset() and cuCtxDestroy() free what was not yet handed over */
static void CUPTIAPI on_api(void *data, CUpti_CallbackDomain domain,
			    CUpti_CallbackId cbid, const void *cbdata)
{
	const CUpti_CallbackData *cb = cbdata;

	(void)data;
	if (cb->callbackSite != CUPTI_API_ENTER)
		return;
	if ((domain == CUPTI_CB_DOMAIN_RUNTIME_API &&
	     cbid == CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020) ||
	    (domain == CUPTI_CB_DOMAIN_DRIVER_API &&
	     cbid == CUPTI_DRIVER_TRACE_CBID_cuCtxDestroy_v2))
		flush_all();
}

static void at_exit(void)
{
	flush_all();
	if (out_fd >= 0)
		close(out_fd);
	out_fd = -1;
}

int InitializeInjection(void);

int InitializeInjection(void)
{
	const char *path = getenv("AK_CUPTI_OUT");
	CUptiResult r;
	char line[96];
	int n;

	if (!path || !*path || out_fd >= 0)
		return 1;
	out_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (out_fd < 0) {
		fprintf(stderr, "libak-cupti: cannot open '%s'\n", path);
		return 1;
	}
	n = snprintf(line, sizeof(line), "{\"kind\":\"start\",\"pid\":%d}\n",
		     (int)getpid());
	out_write(line, (size_t)n);
	r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
	if (r != CUPTI_SUCCESS) {
		write_error("cuptiActivityRegisterCallbacks", r);
		return 1;
	}
	/* device records come out when a context is made: enable it first */
	r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DEVICE);
	if (r != CUPTI_SUCCESS)
		write_error("cuptiActivityEnable(DEVICE)", r);
	r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
	if (r != CUPTI_SUCCESS) {
		write_error("cuptiActivityEnable(CONCURRENT_KERNEL)", r);
		return 1;
	}
	/* another CUPTI client (a profiler inside the program) may hold the
	 * one subscriber slot: then resets are not caught, nothing more */
	if (cuptiSubscribe(&subscriber, on_api, NULL) == CUPTI_SUCCESS) {
		cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API,
			CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020);
		cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API,
			CUPTI_DRIVER_TRACE_CBID_cuCtxDestroy_v2);
	}
	atexit(at_exit);
	return 1;
}
