/*
 * build.h: turning a kernel source into a loadable shared object.
 *
 *	struct strbuf so = STRBUF_INIT, log = STRBUF_INIT;
 *	if (build_kernel(&so, &log, &status, "cuda", "softmax/kernel.cu",
 *			 "sm_90", 300000, &cached) < 0)
 *		... log holds the compiler's output ...
 *
 * Objects are cached under ak_cachedir()/build by a hash of the source,
 * the headers of include/ (kernel_headers()), the exact command line and
 * the compiler's version, so a
 * re-check, a bisect step or the current best in an A/B benchmark is
 * never rebuilt.  Returns 0 (built or cached; *cached set), -1 when the
 * compiler failed (log has its output, status "nvcc exited with 2"), -2
 * when the toolchain is missing.
 */
#ifndef BUILD_H
#define BUILD_H

#include "lib/run.h"
#include "lib/strbuf.h"
#include "lib/toolchain.h"

/* The headers a kernel may include: the names of the *.h files in inc
 * (the installed include/: autokernel.h, the optional ak-half.h ...),
 * sorted, pushed onto names.  0, or -1 after an error message. */
int kernel_headers(struct strvec *names, const char *inc);

int build_kernel(struct strbuf *so, struct strbuf *log, struct strbuf *status,
		 const char *backend, const char *src, const char *arch,
		 int timeout_ms, int *cached);

/*
 * The command build_kernel() runs for backend and arch, for a record of
 * it (export's manifest), in the order it runs:
 *
 *	compiler flags... arch... -I<dir of autokernel.h> -o OUT SRC libs...
 *
 * arch is empty on host (-march=native is among the flags); version is
 * the compiler's version line.  0, or -2 when the compiler is missing
 * (version then says why).  build_command_release() frees it.
 */
struct build_command {
	const char *compiler;           /* static, backend_compiler()'s */
	struct strvec flags, arch, libs;
	struct strbuf version;
};
#define BUILD_COMMAND_INIT { NULL, STRVEC_INIT, STRVEC_INIT, STRVEC_INIT, \
			     STRBUF_INIT }
int build_command(struct build_command *cmd, const char *backend,
		  const char *arch);
void build_command_release(struct build_command *cmd);

#endif
