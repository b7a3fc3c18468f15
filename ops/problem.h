/*
 * problem.h: <name>/problem.json, the fixed terms of one optimization: the
 * op, backend, kernel file, dtypes, shapes, tolerances, scalars and seed.
 * `start` writes it once; the hooks refuse any later change to it.
 *
 *	struct problem p;
 *	if (problem_load(&p, "softmax/problem.json") < 0) ...  // error printed
 *	char *text = problem_dump(&p);                         // free() it
 */
#ifndef PROBLEM_H
#define PROBLEM_H

#include "ops/ops.h"

struct problem {
	const struct op *op;
	char backend[16];
	char kernel[64];                /* file name in the kernel directory */
	enum ak_dtype dtypes[3];
	int n_dtypes;
	struct shape smoke, bench;
	struct shape test[AK_OP_MAX_SHAPES], edge[AK_OP_MAX_SHAPES];
	int n_test, n_edge;
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
/* "f16,bf16" -> dtypes; 0 or error(). */
int problem_set_dtypes(struct problem *p, const char *list);

#endif
