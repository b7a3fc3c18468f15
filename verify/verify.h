/*
 * verify.h: the judge.  The five stages of SPEC section 6 on a loaded
 * kernel, and the interleaved benchmark of several kernels with the speed
 * of light measured in the same run.
 *
 *	struct runner r = RUNNER_INIT;      // runner.h
 *	runner_start(&r, p.backend, timeout_ms, &why);
 *	runner_load(&r, 0, "/cache/ab12.so", &why);
 *	rc = verify_stages(&r, &p, 0, &result, &verdict);   // 0 pass, 1 fail
 *	int slots[] = { 0, 1 };             // candidate, current best
 *	rc = bench_slots(&r, &p, slots, 2, ceilings, &bench, &verdict);
 *
 * Every result is a JSON object the caller owns (json_decref); verdict is
 * one line naming what failed: the stage, shape, dtype and the worst
 * element with its expected and actual value.
 */
#ifndef VERIFY_H
#define VERIFY_H

#include <jansson.h>
#include "problem.h"
#include "runner.h"

extern const char *const stage_names[5];

/*
 * Threads for input generation and the reference.  The host backend's
 * kernels need every core, and OpenMP's idle workers spin, so judging a
 * host kernel uses one thread; a GPU backend's judge may use them all.
 */
void verify_set_threads(int n);

/* 0 all five pass, 1 a stage failed (verdict says which), -1 the harness
 * itself failed (error printed).  progress, if not NULL, gets a line per
 * stage as it finishes. */
int verify_stages(struct runner *r, const struct problem *p, int slot,
		  json_t **result, struct strbuf *verdict, FILE *progress);

/* Times slots[0..n-1] interleaved at the bench shape (dtype: dt), with a
 * copy of the op's minimum traffic.  ceilings may be NULL (floor: the
 * copy alone).  0 ok, 1 a kernel failed during timing (wrong output of a
 * timed call, integrity), -1 harness failure. */
int bench_slots(struct runner *r, const struct problem *p, enum ak_dtype dt,
		const int *slots, int n, json_t *ceilings, json_t **result,
		struct strbuf *verdict);

/* The keep rule of SPEC section 6 on a bench result whose kernel 0 is the
 * candidate and kernel 1 the current best: 1 keep, 0 reject (why says). */
int bench_keep(json_t *bench, double min_gain, struct strbuf *why);

/* Seconds per call limit and bench time from git config or defaults. */
struct judge_config {
	int timeout_ms;         /* autokernel.timeout, seconds; default 30 */
	double bench_ms;        /* autokernel.benchTime, ms; default 1500 */
};

#endif
