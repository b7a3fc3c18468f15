/*
 * torchref.h: PyTorch's own op, timed beside a kernel at the same shape
 * and dtype (`bench --torch`).
 *
 * The op is python/torch_ref/<op>.py (PyTorch eager, exactly as the ABI
 * defines the op), and where torch.compile works (torch 2 on a CUDA
 * device) python/torch_ref/compiled/<op>.py, loaded as the kernels of a
 * runner of their own: the Python runner in its reference role
 * (verify/runners.h: "torch-<backend>"), on the kernel's device: the
 * fake device (the CPU) beside a host kernel, the GPU beside the others.
 * The benchmark is the kernel's (verify/verify.h: bench_fresh()): fresh
 * inputs for every timed call, the L2 flushed, every output checked
 * against the fp64 reference, under the device's lock; so a reference
 * that computes the wrong thing fails as a kernel would.
 *
 *	struct torchref t = TORCHREF_INIT;
 *	torchref_spawn(&t, c.p.backend);        // torch imports meanwhile
 *	... judge_build() the kernel ...
 *	if (torchref_ready(&t, &c.p) < 0)
 *		... t.why: "no interpreter imports torch: ..." ...
 *	else if (!t.compile)
 *		... t.why_compile: "torch 1.13.0 has no torch.compile ..." ...
 *	json_t *fig = torchref_bench(&t, &j, &c.p, &shape, dt);  // each shape
 *	torchref_relate(fig, kernel_us, floor_us);   // the kernel's run
 *	torchref_release(&t);                   // stops it, frees t
 *
 * torchref_bench() returns {"torch": version, "eager": {median_us, q1_us,
 * q3_us, min_us, n, roofline}, "compile": {...}, "checked": {...}} (the
 * caller's), "compile" absent with "no_compile" saying why, or
 * {"absent": why} when PyTorch could not be timed at that shape (it
 * lacks the op for the dtype on this device, its output failed a check,
 * it crashed).  torchref_relate() adds "vs_eager" and "vs_compile",
 * PyTorch's time over the kernel's, and makes each "roofline" the
 * kernel's floor over PyTorch's time, as the kernel's is.
 */
#ifndef JUDGE_TORCHREF_H
#define JUDGE_TORCHREF_H

#include "judge/judge.h"

struct torchref {
	struct runner r;
	int spawned;            /* the runner process was started */
	int ok;                 /* the eager module is loaded */
	int compile;            /* and the torch.compile one */
	struct strbuf why;      /* why not ok */
	struct strbuf why_compile;      /* why not compile */
	char version[64];       /* torch's, from the runner's hello */
};
#define TORCHREF_INIT { .r = RUNNER_INIT, .why = STRBUF_INIT, \
			.why_compile = STRBUF_INIT }

/* Starts the runner for a kernel of backend: 0, or -1 with t->why. */
int torchref_spawn(struct torchref *t, const char *backend);
/* Says hello and loads p's modules: 0 (t->ok; t->compile, else
 * t->why_compile), or -1 with t->why (the runner is stopped). */
int torchref_ready(struct torchref *t, const struct problem *p);
/* PyTorch timed at shape s in dtype dt, with j's device lock and
 * ceilings; never NULL. */
json_t *torchref_bench(struct torchref *t, struct judge *j,
		       const struct problem *p, const struct shape *s,
		       enum ak_dtype dt);
/* The device PyTorch runs on, from its runner's hello: "fake device
 * (CPU)" beside a host kernel. */
const char *torchref_device(const struct torchref *t);
/* fig beside a kernel of kernel_us whose floor was floor_us. */
void torchref_relate(json_t *fig, double kernel_us, double floor_us);
void torchref_release(struct torchref *t);

#endif
