/*
 * autokernel.h: the kernel ABI of git-autokernel.
 *
 * A kernel file is an ordinary source file for its backend (C for `host`,
 * CUDA C++ for `cuda`, HIP C++ for `hip`) that includes this header and
 * defines one entry point:
 *
 *	int ak_kernel(const struct ak_args *a);
 *
 * The harness builds the file into a shared object (cc -shared, nvcc -shared,
 * hipcc -shared), loads it in a separate runner process and calls ak_kernel()
 * with the op's tensors.  The recipe, from the kernel's side:
 *
 *   1. Read the inputs a->in[0 .. a->n_in-1] and write every element of the
 *      outputs a->out[0 .. a->n_out-1].  Tensors live in device memory (host
 *      memory for the host backend).  The order and meaning of the tensors and
 *      of a->scalar[] is the op's contract: `git autokernel ops` prints it.
 *   2. Launch the work on a->stream (a cudaStream_t or hipStream_t; NULL on
 *      the host backend) and return 0.  The harness synchronizes the device
 *      and times the call from before it to the end of all work it queued.
 *      Return non-zero for "cannot run this case" (the harness reports it).
 *   3. Optionally define ak_workspace_size(): the harness then allocates that
 *      many bytes of device scratch, passes it as a->workspace, and checks
 *      that nothing is written past it.
 *
 * What a kernel must not do: allocate device memory, call vendor math
 * libraries (cuBLAS, cuDNN, rocBLAS, ...), write outside its outputs and
 * workspace, or modify its inputs.  The harness poisons outputs before every
 * call, puts guard bytes around them, checksums the inputs before and after,
 * and checks every output element against an fp64 reference, so each of
 * those is a failed verification, not a silent wrong answer.
 *
 * Layout: the last dimension is contiguous, strides are in elements and the
 * harness passes dense row-major tensors (stride[ndim-1] == 1).  A tensor of
 * ndim 0 is a scalar with one element.  Unused shape/stride entries are 0.
 * f16 and bf16 elements are uint16_t bit patterns; a host kernel may
 * include the optional ak-half.h beside this header for conversions to
 * and from float (round to nearest even), as the host starters do.
 *
 * Tunables: a kernel may declare compile-time parameters for the built-in
 * tuner, one `#define NAME VALUE` per line followed on the same line by a
 * comment of the form `autokernel: tune 64,128,256,512` (the values to
 * try), optionally ending in `if EXPR`, a C expression over other tunables
 * that a combination must satisfy (`if BLOCK*ROWS <= 1024`).  The kernels
 * under kernels/ show it in use; the manual's section TUNABLES (`git
 * autokernel --help`) has the whole syntax.
 */
#ifndef AUTOKERNEL_H
#define AUTOKERNEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define AK_ABI_VERSION 1
#define AK_MAX_DIMS 4

enum ak_dtype { AK_F16, AK_BF16, AK_F32, AK_F64, AK_I32, AK_I64 };

/* Bytes per element of a dtype; 0 for a value outside the enum. */
static inline size_t ak_dtype_size(int dt)
{
	switch (dt) {
	case AK_F16: case AK_BF16: return 2;
	case AK_F32: case AK_I32: return 4;
	case AK_F64: case AK_I64: return 8;
	default: return 0;
	}
}

struct ak_tensor {
	void *data;            /* device memory (host memory for the host backend) */
	enum ak_dtype dtype;
	int ndim;
	int64_t shape[4];
	int64_t stride[4];     /* in elements */
};

struct ak_args {
	int n_in, n_out;
	const struct ak_tensor *in;
	struct ak_tensor *out;  /* allocated by the harness */
	double scalar[4];       /* op parameters: eps, scale, ... (see `ops`) */
	void *stream;           /* cudaStream_t / hipStream_t; NULL on host */
	void *workspace;        /* scratch, size from ak_workspace_size() */
	size_t workspace_size;
};

/* The entry point.  Returns 0 on success. */
int ak_kernel(const struct ak_args *a);

/* Optional: bytes of device scratch this call needs (0 if not defined). */
size_t ak_workspace_size(const struct ak_args *a);

/* Number of elements of a tensor (1 for a scalar). */
static inline int64_t ak_numel(const struct ak_tensor *t)
{
	int64_t n = 1;
	for (int i = 0; i < t->ndim; i++)
		n *= t->shape[i];
	return n;
}

#ifdef __cplusplus
}
#endif

#endif /* AUTOKERNEL_H */
