/*
 * build.h: turning a kernel source into a loadable shared object.
 *
 *	struct strbuf so = STRBUF_INIT, log = STRBUF_INIT;
 *	if (build_kernel(&so, &log, &status, "cuda", "softmax/kernel.cu",
 *			 "sm_90", 300000, &cached) < 0)
 *		... log holds the compiler's output ...
 *
 * Objects are cached under ak_cachedir()/build by a hash of the source,
 * the header, the exact command line and the compiler's version, so a
 * re-check, a bisect step or the current best in an A/B benchmark is
 * never rebuilt.  Returns 0 (built or cached; *cached set), -1 when the
 * compiler failed (log has its output, status "nvcc exited with 2"), -2
 * when the toolchain is missing.
 */
#ifndef BUILD_H
#define BUILD_H

#include "lib/strbuf.h"

/* The compiler a backend uses (cc, nvcc, hipcc), honouring overrides. */
const char *backend_compiler(const char *backend);

int build_kernel(struct strbuf *so, struct strbuf *log, struct strbuf *status,
		 const char *backend, const char *src, const char *arch,
		 int timeout_ms, int *cached);

#endif
