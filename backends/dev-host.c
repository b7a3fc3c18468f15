/*
 * dev-host.c: the host "device".  Memory is host memory, the stream is
 * NULL, time is the monotonic clock, and the cache is flushed by writing a
 * buffer of twice the last-level cache between timed calls.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include "backends/dev.h"

const char *dev_backend = "host";

static char err[256];
static unsigned char *flush_buf;
static size_t flush_size;
static double t0;

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static long cache_bytes(void)
{
	long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
	long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);

	if (l3 > 0)
		return l3;
	return l2 > 0 ? l2 : 32L << 20;
}

static void cpu_name(char *buf, size_t n)
{
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[512];

	snprintf(buf, n, "unknown CPU");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *colon = strchr(line, ':');

		if (!strncmp(line, "model name", 10) && colon) {
			snprintf(buf, n, "%s", colon + 2);
			buf[strcspn(buf, "\n")] = '\0';
			break;
		}
	}
	fclose(f);
}

int dev_init(json_t *info)
{
	char name[256];
	struct utsname u;

	cpu_name(name, sizeof(name));
	uname(&u);
	/* Twice the cache, but a VM may report its host's whole L3: past
	 * 32 MiB a flush costs more time than the kernels it separates. */
	flush_size = 2 * (size_t)cache_bytes();
	if (flush_size > (32u << 20))
		flush_size = 32u << 20;
	if (flush_size < (8u << 20))
		flush_size = 8u << 20;
	flush_buf = malloc(flush_size);
	if (!flush_buf) {
		snprintf(err, sizeof(err), "out of memory");
		return -1;
	}
	memset(flush_buf, 1, flush_size);
	json_object_set_new(info, "name", json_string(name));
	json_object_set_new(info, "driver", json_string(u.release));
	json_object_set_new(info, "arch", json_string(u.machine));
	json_object_set_new(info, "cores", json_integer(omp_get_max_threads()));
	json_object_set_new(info, "cache_bytes", json_integer(cache_bytes()));
	json_object_set_new(info, "memory_bytes",
		json_integer((json_int_t)sysconf(_SC_PHYS_PAGES) *
			     sysconf(_SC_PAGESIZE)));
	return 0;
}

const char *dev_error(void)
{
	return err;
}

int dev_sticky(void)
{
	return 0;
}

int dev_alloc(void **p, size_t n)
{
	if (posix_memalign(p, 256, n ? n : 1)) {
		snprintf(err, sizeof(err), "out of memory allocating %zu bytes",
			 n);
		return -1;
	}
	return 0;
}

void dev_free(void *p)
{
	free(p);
}

int dev_h2d(void *dst, const void *src, size_t n)
{
	memcpy(dst, src, n);
	return 0;
}

int dev_d2h(void *dst, const void *src, size_t n)
{
	memcpy(dst, src, n);
	return 0;
}

int dev_fill(void *p, unsigned char byte, size_t n)
{
	memset(p, byte, n);
	return 0;
}

/*
 * One core's copy.  A parallel copy's barrier waits for a descheduled
 * thread whenever the machine is busy (CI runs tests two at a time), and
 * a floor that moves by milliseconds is no floor; so the host's floor is
 * what one core moves, and a parallel kernel may pass 100% of it.
 */
int dev_copy(void *dst, const void *src, size_t n)
{
	memcpy(dst, src, n);
	return 0;
}

void *dev_stream(void)
{
	return NULL;
}

int dev_after_call(void)
{
	return 0;
}

int dev_sync(void)
{
	return 0;
}

int dev_generate(void *p, int dt, int64_t n, const struct ak_gen *g,
		 uint64_t seed, int t)
{
	#pragma omp parallel for schedule(static) if (n > 65536)
	for (int64_t i = 0; i < n; i++)
		ak_gen_store(p, dt, (uint64_t)i, seed, t, g);
	return 0;
}

int dev_flush_cache(void)
{
	static unsigned char v;

	v++;
	for (size_t i = 0; i < flush_size; i += 64)
		flush_buf[i] = v;
	return 0;
}

int dev_timer_start(void)
{
	t0 = now_us();
	return 0;
}

int dev_timer_stop(double *us)
{
	*us = now_us() - t0;
	return 0;
}

/* Copy bandwidth over a buffer 8x the cache, and an FMA-bound loop that
 * approximates the cores' f32 rate (no BLAS is assumed on the host). */
int dev_ceilings(json_t *out)
{
	size_t n = 4 * flush_size;
	void *a, *b;
	double best = 1e30, us;
	double flops_best = 0;

	if (dev_alloc(&a, n) || dev_alloc(&b, n))
		return -1;
	memset(a, 1, n);
	memset(b, 2, n);
	for (int i = 0; i < 5; i++) {
		dev_timer_start();
		dev_copy(b, a, n);
		dev_timer_stop(&us);
		if (us < best)
			best = us;
	}
	free(a);
	free(b);
	for (int rep = 0; rep < 3; rep++) {
		double t, s = 0;
		long iters = 1 << 20;

		dev_timer_start();
		#pragma omp parallel reduction(+:s)
		{
			float acc[64];

			for (int j = 0; j < 64; j++)
				acc[j] = (float)j;
			for (long i = 0; i < iters; i++)
				#pragma omp simd
				for (int j = 0; j < 64; j++)
					acc[j] = acc[j] * 0.9999f + 0.0001f;
			for (int j = 0; j < 64; j++)
				s += acc[j];
		}
		dev_timer_stop(&t);
		if (s == 12345.0)
			fprintf(stderr, "\n");
		t = 2.0 * 64 * iters * omp_get_max_threads() / (t * 1e-6);
		if (t > flops_best)
			flops_best = t;
	}
	json_object_set_new(out, "copy_gbps", json_real(2.0 * n / (best * 1e3)));
	json_object_set_new(out, "matrix_tflops", json_pack("{s:f,s:f,s:f}",
		"f16", flops_best / 1e12, "bf16", flops_best / 1e12,
		"f32", flops_best / 1e12));
	json_object_set_new(out, "matrix_method",
		json_string("f32 FMA loop on all cores"));
	return 0;
}
