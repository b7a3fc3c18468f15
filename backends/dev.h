/*
 * dev.h: what a runner needs from a device.  dev-host.c implements it on
 * the CPU, dev-gpu.c on the CUDA runtime (-DAK_CUDA) or on HIP (-DAK_HIP);
 * runner.c holds everything else (protocol, guard bands, poisoning, input
 * checks, interleaved timing) once, for every backend.
 *
 * Every function returns 0 on success or -1 with the reason in dev_error().
 * dev_sticky() says the last error corrupted the context (an illegal
 * address on a GPU): the runner then reports it and exits, and the parent
 * starts a fresh process for the next case.
 */
#ifndef DEV_H
#define DEV_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include "ak-wire.h"

extern const char *dev_backend;         /* "host", "cuda", "hip" */

int dev_init(json_t *info);             /* name, driver, arch, sizes */
const char *dev_error(void);
int dev_sticky(void);

int dev_alloc(void **p, size_t n);
void dev_free(void *p);
int dev_h2d(void *dst, const void *src, size_t n);
int dev_d2h(void *dst, const void *src, size_t n);
int dev_fill(void *p, unsigned char byte, size_t n);
int dev_copy(void *dst, const void *src, size_t n);     /* on the stream */
void *dev_stream(void);

/* After a kernel call: launch errors, then a device-wide synchronize. */
int dev_after_call(void);
int dev_sync(void);

/* Fills n elements of dtype dt at p (device memory) with the benchmark's
 * fresh inputs of tensor t under seed (ak-wire.h), on the stream. */
int dev_generate(void *p, int dt, int64_t n, const struct ak_gen *g,
		 uint64_t seed, int t);

/* Evicts the last-level cache by writing a buffer twice its size. */
int dev_flush_cache(void);

/* Brackets one timed call; the stop point waits for all work on the
 * device, not only the kernel's stream. */
int dev_timer_start(void);
int dev_timer_stop(double *us);

/* The device's ceilings: copy bandwidth and matrix rates, into out. */
int dev_ceilings(json_t *out);

#endif
