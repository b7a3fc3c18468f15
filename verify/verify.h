/*
 * verify.h: the judge.  The five stages (git-autokernel(1), JUDGING) on a loaded
 * kernel, and the interleaved benchmark of several kernels with the speed
 * of light measured in the same run.
 *
 *	struct cases *cs = cases_start(&p, AK_F16);  // while it compiles
 *	struct runner r = RUNNER_INIT;      // client.h
 *	runner_start(&r, p.backend, timeout_ms, &why);
 *	runner_load(&r, 0, "/cache/ab12.so", &why);
 *	rc = verify_stages(&r, &p, cs, 0, NULL, &result, &verdict, NULL);  // 0 pass
 *	int slots[] = { 0, 1 };             // candidate, current best
 *	struct settle st = { 0.01, 0 };     // minGain, maxShapeRegression
 *	rc = bench_workload(&r, &p, slots, 2, ceilings, 1.0, &st,
 *			    &bench, &verdict);  // every workload shape
 *	cases_free(cs);
 *
 * Every result is a JSON object the caller owns (json_decref); verdict is
 * one line naming what failed: the stage, shape, dtype and the worst
 * element with its expected and actual value.
 */
#ifndef VERIFY_H
#define VERIFY_H

#include <jansson.h>
#include "ops/problem.h"
#include "verify/client.h"

extern const char *const stage_names[5];

/*
 * Threads for input generation and the reference.  The host backend's
 * kernels need every core, and OpenMP's idle workers spin, so judging a
 * host kernel uses one thread; a GPU backend's judge may use them all.
 */
void verify_set_threads(int n);

/*
 * The inputs and fp64 references of every case of p's stages and, when
 * bench_dt >= 0, of its benchmark at that dtype.  None depends on the
 * kernel, so a judge starts them before it compiles the candidate: a
 * thread makes them while the compiler runs, staying at most 1 GiB (an
 * eighth of the RAM on a small machine) ahead of the stages; a case holds
 * its inputs and an fp64 reference of every row it checks.  p must
 * outlive them.  cases_free() stops the thread
 * and frees what it made; it accepts NULL.
 */
struct cases;
struct cases *cases_start(const struct problem *p, int bench_dt);
void cases_free(struct cases *cs);

/* Sizes (and reserves) r's tensor mapping for every case of cs at once,
 * so that neither process remaps it case by case: best before the build,
 * where it costs nothing. */
void cases_map(struct cases *cs, struct runner *r);

/*
 * Around each call of the kernel in the stages: enter() before the
 * request that runs it, leave() once it has answered.  The judge takes
 * the device's lock there (shared), for the call alone: a benchmark
 * beside it waits for no case's inputs, reference or comparison.
 */
struct device_use {
	void (*enter)(void *arg);
	void (*leave)(void *arg);
	void *arg;
};

/* 0 all five pass, 1 a stage failed (verdict says which), -1 the harness
 * itself failed (error printed).  cs: from cases_start() for p, or NULL
 * to make each case when it runs.  dev, if not NULL, brackets each call.
 * progress, if not NULL, gets a line per stage as it finishes. */
int verify_stages(struct runner *r, const struct problem *p,
		  struct cases *cs, int slot, const struct device_use *dev,
		  json_t **result, struct strbuf *verdict, FILE *progress);

/*
 * When a shape's benchmark ends early (bench.c: settled()): once the
 * candidate's and the best's quartiles are apart, the candidate faster by
 * gain, or slower by more than slack: the keep rule's minGain and
 * maxShapeRegression, so that the early end decides what every call
 * timed would.  A NULL settle: no early end.
 */
struct settle {
	double gain, slack;
};

/*
 * Times slots[0..n-1] (0: the candidate, 1: the best) interleaved at
 * shape s in dtype dt, with a copy of the op's minimum traffic; every
 * call of every kernel on inputs generated afresh on the device, its
 * output checked on rows chosen after it (doc/runner-protocol.md);
 * scale times the usual time budget; with a settle it ends early once
 * the verdict is settled.  ceilings may be NULL (floor: the copy
 * alone).  0 ok, 1 a kernel failed during timing (a wrong output of a
 * timed call, integrity; verdict says which call), -1 harness failure.
 */
int bench_fresh(struct runner *r, const struct problem *p,
		const struct shape *s, enum ak_dtype dt, const int *slots,
		int n, json_t *ceilings, double scale,
		const struct settle *settle, json_t **result,
		struct strbuf *verdict);

/*
 * Every shape of p's workload (problem.h) in turn, the time budget shared
 * among them; result = {"shapes": [bench, each with its "weight"],
 * "total": {candidate_us, best_us, baseline_us, floor_us, noise_us,
 * apart}}, the totals weighted (the model's time in the op).  With a
 * settle a shape ends early once its verdict is settled.  0, or 1 with
 * verdict naming the shape.
 */
int bench_workload(struct runner *r, const struct problem *p,
		   const int *slots, int n, json_t *ceilings, double scale,
		   const struct settle *settle, json_t **result,
		   struct strbuf *verdict);

/*
 * The keep rule on a workload's result: the weighted total beats the
 * best's beyond the total's noise and by min_gain, and no shape is slower
 * than the best's beyond its own noise by more than max_regress ("slower
 * at 32x50257 (+41%), though 12% faster overall").  One shape: exactly
 * bench_keep().
 */
int workload_keep(json_t *wl, double min_gain, double max_regress,
		  struct strbuf *why);

/* The keep rule (git-autokernel(1), JUDGING) on a bench result whose kernel 0 is the
 * candidate and kernel 1 the current best: 1 keep, 0 reject (why says).
 * Faster beyond the noise: by more than twice the standard error of the
 * difference of the medians (from the IQRs), or with the candidate's
 * third quartile under the best's first. */
int bench_keep(json_t *bench, double min_gain, struct strbuf *why);

/* Seconds per call limit and bench time from git config or defaults. */
struct judge_config {
	int timeout_ms;         /* autokernel.timeout, seconds; default 30 */
	double bench_ms;        /* autokernel.benchTime, ms; default 1500 */
};

#endif
