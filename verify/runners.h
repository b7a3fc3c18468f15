/*
 * runners.h: the runner of each backend, how the parent starts it, and
 * the Triton runner's warm-up (its JIT compile, the build step).
 *
 * host, cuda, hip: <libexecdir>/ak-runner-<backend>, the C runner built
 * with the tool.  triton: the Python runner, <datadir>/python/
 * ak_runner_triton.py, under the interpreter that imports torch
 * (lib/python.h), with Triton's cache under the tool's
 * (TRITON_CACHE_DIR=<cachedir>/triton, unless it is set).
 * torch-<backend> (torch_runner_name()): the same Python runner running
 * PyTorch's own ops (AK_RUNNER_REFERENCE=1, judge/torchref.h) on the
 * device of a <backend> kernel: the fake device (the CPU) for host, the
 * GPU for cuda and hip, $AUTOKERNEL_TRITON_DEVICE's for triton; with
 * Inductor's cache under the tool's (TORCHINDUCTOR_CACHE_DIR=
 * <cachedir>/torchinductor, unless it is set).
 *
 *	struct child c = CHILD_INIT;
 *	if (runner_command(&c.args, &c.env, "triton", &why) < 0)
 *		... why: "no interpreter imports torch: ..." ...
 *	if (runner_present("cuda", &why) < 0)
 *		... why: "no cuda runner at '...' (was ... built with ...)" ...
 *	if (!strcmp(p.backend, "triton") &&
 *	    runner_warm(&r, 0, &p, &why) < 0)     // after runner_load()
 *		... why: "at 4x32 f16: ak_kernel() raised ..." ...
 */
#ifndef VERIFY_RUNNERS_H
#define VERIFY_RUNNERS_H

#include "ops/problem.h"
#include "verify/client.h"

/* Triton's cache: $TRITON_CACHE_DIR, else <cachedir>/triton; Inductor's
 * (torch.compile): $TORCHINDUCTOR_CACHE_DIR, else <cachedir>/torchinductor. */
const char *triton_cache_dir(void);
const char *inductor_cache_dir(void);

/* Whether backend's runner is the Python one (triton, torch-*). */
int runner_is_python(const char *backend);
/* Whether backend's runner opens a GPU (all but host and torch-host). */
int runner_on_gpu(const char *backend);
/* PyTorch's runner beside a backend's kernel: "torch-cuda" for "cuda". */
void torch_runner_name(char *out, size_t n, const char *backend);

/* Appends the command and its environment; 0, or -1 with why. */
int runner_command(struct strvec *args, struct strvec *env,
		   const char *backend, struct strbuf *why);

/* Whether backend's runner is there to start; 0, or -1 with why (which
 * may be NULL). */
int runner_present(const char *backend, struct strbuf *why);

/* Whether asking backend's runner for a device is worth its start: not
 * for triton without an NVIDIA driver (its start imports torch, seconds),
 * unless $AUTOKERNEL_TRITON_DEVICE names a device. */
int runner_worth_asking(const char *backend);

/*
 * Calls the kernel in slot once at each shape and dtype of p's stages and
 * benchmark, on zero inputs and checking nothing, so that Triton compiles
 * it for each before the stages run: an error there (a compile error, an
 * exception, a hang past twice autokernel.timeout) is the build's
 * verdict.  0, or -1 with why.
 */
int runner_warm(struct runner *r, int slot, const struct problem *p,
		struct strbuf *why);
/* The same at one shape and dtype, under timeout_ms (torch.compile's
 * graph for it, judge/torchref.c); 0, or -1 with why ("at 64x4096 f16:
 * ..."). */
int runner_warm_shape(struct runner *r, int slot, const struct problem *p,
		      const struct shape *s, enum ak_dtype dt, int timeout_ms,
		      struct strbuf *why);

#endif
