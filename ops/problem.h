/*
 * problem.h: <name>/problem.json, the fixed terms of one optimization: the
 * op, backend, kernel file, dtypes, shapes, tolerances, scalars (and the
 * layout they hold, for an op of several) and seed.
 * `start` writes it once; the hooks refuse any later change to it.
 *
 *	struct problem p;
 *	if (problem_load(&p, "softmax/problem.json") < 0) ...  // error printed
 *	char *text = problem_dump(&p);                         // free() it
 */
#ifndef PROBLEM_H
#define PROBLEM_H

#include "ops/ops.h"
#include "lib/strbuf.h"

/* One shape of the workload: the model's share of the op's time there. */
struct work {
	struct shape s;
	double weight;                  /* the weights sum to 1 */
	enum ak_dtype dt;
};

struct problem {
	const struct op *op;
	char backend[16];
	char kernel[64];                /* file name in the kernel directory */
	enum ak_dtype dtypes[3];
	int n_dtypes;
	struct shape smoke, bench;
	struct shape test[AK_OP_MAX_SHAPES], edge[AK_OP_MAX_SHAPES];
	int n_test, n_edge;
	/* the benchmark's shapes: "workload" in problem.json, else one, the
	 * bench shape at the first dtype, weight 1 (bench is work[0].s) */
	struct work work[AK_OP_MAX_SHAPES];
	int n_work;
	struct tolerance tol[3];        /* by dtype: f16, bf16, f32 */
	double scalar[4];
	unsigned long long seed;
};

/* The backends a problem may name, and their kernel file's extension:
 * "host" -> ".c", "cuda" -> ".cu", "hip" -> ".hip", "triton" -> ".py";
 * NULL if unknown. */
const char *backend_ext(const char *backend);
int backend_known(const char *backend);

/* The op's defaults for a backend; the bench shape is CPU-sized on host. */
void problem_default(struct problem *p, const struct op *op,
		     const char *backend);
/* Parses problem.json text; origin names it in messages.  0 or error(). */
int problem_parse(struct problem *p, const char *text, const char *origin);
int problem_load(struct problem *p, const char *path);
char *problem_dump(const struct problem *p);
/*
 * The workload from "SHAPE[:WEIGHT[:DTYPE]]" strings (--shape): weights
 * default to 1 and are normalized, a dtype must be one of p's, and the
 * first shape becomes the bench shape.  0 or error().
 */
int problem_set_workload(struct problem *p, const char *const *specs,
			 int n);
/* Weights that sum to 1, and bench = work[0]'s shape. */
void problem_normalize_workload(struct problem *p);

/*
 * The layout of an op that has several (rotary_embedding: "interleaved",
 * "half"), kept in scalar[0] as its index in op->layouts: set by name (0
 * or error()), read back (NULL for an op of one layout), looked up (-1).
 */
int problem_set_layout(struct problem *p, const char *name);
const char *problem_layout(const struct problem *p);
int op_layout_index(const struct op *op, const char *name);
/* Layout i of op by name, or NULL (none such, or an op of one layout). */
const char *op_layout_name(const struct op *op, int i);

/* "f16,bf16" -> dtypes; 0 or error(). */
int problem_set_dtypes(struct problem *p, const char *list);

/*
 * The dtypes of p (f16, bf16, f32) whose tolerance is looser than the
 * op's default, atol or rtol above it: a mask of 1 << dtype.  For each,
 * one line, "PATH: the f16 tolerance (atol A, rtol R) is looser than
 * OP's default (atol A, rtol R)", goes into out, or to warning() when
 * out is NULL.  path names problem.json in the line ("softmax/problem.json").
 */
unsigned problem_loose_tolerances(const struct problem *p, const char *path,
				  struct strbuf *out);

#endif
