/*
 * profile.h: where a model's GPU time goes, op by op (`git autokernel
 * profile`).
 *
 * A profile is filled from one of two sources:
 *
 *   profile_read_trace()   a PyTorch profiler chrome trace (plain or gzip):
 *                          each kernel is linked to the CPU op that
 *                          launched it and the scopes around that op,
 *                          which name the op and give its shapes;
 *   profile_read_cupti()   the JSON lines that libak-cupti.so (the CUPTI
 *                          injection library) writes for any CUDA program:
 *                          kernel names only, no shapes.
 *
 * The mapping rules live in map.c.  Every kernel lands in one op
 * or in "not covered"; a call is one launch of the op (the CPU op or
 * scope all of its kernels came from), and its shape is kept, so each op
 * has a typical shape (the one that takes the most time) and a floor (the
 * sum over its calls of the op's bytes over the copy bandwidth or flops
 * over the matrix rate, whichever is longer).  profile_finish() ranks the
 * ops and gives each the Amdahl bound: the whole model's speedup if that
 * op alone ran at its floor.
 *
 *	struct profile p;
 *	struct prof_ceilings c;
 *	profile_init(&p);
 *	if (profile_read_trace(&p, "trace.json.gz") < 0)
 *		...                             // error() printed
 *	prof_ceilings_find(&c, p.device, "cuda");
 *	profile_finish(&p, &c);
 *	for (i = 0; i < p.nr_rank; i++)
 *		use(p.rank[i]);                 // by time, covered ops only
 *	profile_release(&p);
 *
 * All strings in a profile are owned by it.
 */
#ifndef PROFILE_H
#define PROFILE_H

#include <stdint.h>
#include <jansson.h>
#include "ops/dtype.h"
#include "ops/ops.h"

#define PROF_MAX_OPS 16

/* The calls of one op at one shape and dtype (s.n == 0: shape unknown). */
struct prof_shape {
	struct shape s;
	enum ak_dtype dt;
	int dt_known;
	double us;
	long calls;
};

struct prof_op {
	const struct op *op;            /* NULL: not covered */
	double us;                      /* GPU kernel time */
	long kernels, calls;
	struct prof_shape *shapes;
	size_t nr_shapes, alloc_shapes;
	/* after profile_finish() */
	const struct prof_shape *typical; /* most time at a known shape */
	double share;                   /* of all kernel time */
	double floor_us;                /* < 0: unknown (no shape) */
	double bound;                   /* model speedup at the floor */
	double limit;                   /* ... with the op taking no time */
};

/* The not covered time by what launched it: a CPU op or a kernel name. */
struct prof_name {
	char *name;
	double us;
	long kernels;
};

struct prof_ceilings {
	double copy_gbps;
	double tflops[3];               /* f16, bf16, f32 (enum ak_dtype) */
	int measured;                   /* 0: the default H200 figures */
	int measured_matrix;            /* the matrix rates too */
	char origin[512];               /* the file they came from */
};

struct profile {
	struct prof_op op[PROF_MAX_OPS];        /* indexed as ops[] */
	int nr_ops;
	struct prof_op other;                   /* not covered */
	struct prof_name *names;
	size_t nr_names, alloc_names;
	uint32_t *name_slots;                   /* hash of names, index + 1 */
	size_t nr_slots;
	double total_us;                        /* all kernel time */
	double memcpy_us;                       /* copies and fills, apart */
	long kernels;
	long dropped;                           /* records CUPTI lost */
	char *device;                           /* "NVIDIA H200" or NULL */
	/* after profile_finish() */
	struct prof_op *rank[PROF_MAX_OPS];     /* covered ops by time */
	int nr_rank;
	struct prof_name **top_names;           /* not covered, by time */
	struct prof_ceilings ceil;
};

void profile_init(struct profile *p);
void profile_release(struct profile *p);

/* Reads a chrome trace, plain or gzipped; 0, or -1 after an error(). */
int profile_read_trace(struct profile *p, const char *path);
/* Reads libak-cupti.so's JSON lines; 0, or -1 after an error(). */
int profile_read_cupti(struct profile *p, const char *path);

/*
 * Adds one kernel of us microseconds to op index opi (-1: not covered,
 * under the name what).  new_call: the kernel starts a call, at shape s
 * (NULL or s->n == 0: unknown) in dtype *dt (NULL: unknown).
 */
void profile_add(struct profile *p, int opi, const struct shape *s,
		 const enum ak_dtype *dt, double us, int new_call,
		 const char *what);

/* The device's measured ceilings (device-<backend>-<name>.json in the
 * repository or the user's cache, as `init` writes them), else the default
 * H200 figures.  device may be NULL. */
void prof_ceilings_find(struct prof_ceilings *c, const char *device,
			const char *backend);

/* Floors, shares, bounds and the ranking. */
void profile_finish(struct profile *p, const struct prof_ceilings *c);

/* The floor of one call, in microseconds. */
double prof_floor_us(const struct op *op, const struct shape *s,
		     enum ak_dtype dt, const struct prof_ceilings *c);

/*
 * The mapping rules (map.c).
 *
 * prof_map_kernel(): an op index (into ops[]) from a kernel's name alone,
 * or -1; *dt from the name where it says ("half", "bf16" ...), else
 * unchanged and *dt_known 0.
 */
int prof_map_kernel(const char *name, enum ak_dtype *dt, int *dt_known);
/* Index of op name in ops[], or -1. */
int prof_op_index(const char *name);
/* A kernel name shortened for a table: no "void ", no parameter list. */
void prof_short_name(char *buf, size_t len, const char *name);

/*
 * prof_map_event(): the op a CPU op (is_op) or a scope (a Python function,
 * an nn.Module, a record_function annotation) stands for: an op index,
 * PROF_MAP_MLP for a scope that is fused_mlp if it holds a SwiGLU (the
 * caller checks its contents), or PROF_MAP_NONE.
 */
enum { PROF_MAP_NONE = -1, PROF_MAP_MLP = -2 };
int prof_map_event(const char *name, int is_op);
/* aten::mm, addmm, bmm, matmul, linear ... */
int prof_is_matmul(const char *name);
int prof_is_backward(const char *name);
/* "silu" 1, "mul" 2, both ("silu_and_mul") 3, else 0. */
int prof_swiglu_part(const char *name);

/*
 * The shape of op index opi from a CPU op's "Input Dims" and "Input type"
 * (record_shapes=True), in the op's dimension order: a linear's input
 * [T,D] and weight [F,D] make matmul M=T, N=F, K=D.  For fused_mlp, pass
 * the MLP's down projection.  0, or -1 when the op has no usable shape.
 */
int prof_shape_from_op(int opi, const char *name, json_t *args,
		       struct shape *s, enum ak_dtype *dt, int *dt_known);

#endif
