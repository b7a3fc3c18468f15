/*
 * judge.h: what the commands and hooks share to judge a kernel: finding
 * the candidate (work tree, index, revision or a plain directory),
 * building it, and driving a runner through the stages and the benchmark.
 *
 *	struct candidate c = CANDIDATE_INIT;
 *	struct judge j = JUDGE_INIT;
 *	if (candidate_load(&c, "--index", NULL) ||        // or NULL, REV, DIR
 *	    judge_start(&j, c.p.backend))
 *		...
 *	struct cases *cs = cases_start(&c.p, -1);         // made during the build
 *	rc = judge_build(&j, &c, 0, &verdict);            // -1: compile error
 *	rc = verify_stages(&j.r, &c.p, cs, 0, NULL, &res, &verdict, stderr);
 *	cases_free(cs);
 *	judge_stop(&j);
 *	candidate_release(&c);
 */
#ifndef JUDGE_H
#define JUDGE_H

#include <limits.h>
#include <jansson.h>
#include "ops/problem.h"
#include "verify/client.h"
#include "verify/verify.h"

struct candidate {
	char name[256];         /* the experiment: directory in the repo */
	char dir[PATH_MAX];     /* holds problem.json and the kernel */
	char src[PATH_MAX + 80];/* the kernel source */
	char label[128];        /* "work tree", "index", "HEAD (abc1234)" */
	char commit[48];        /* full id when loaded from a revision */
	const char *where;      /* set before candidate_load(): how its
				 * messages name the revision ("the staged
				 * tree"), else the revision as given */
	struct problem p;
	char *tmpdir;           /* removed by candidate_release() */
	char *so;               /* built object, after judge_build() */
	int cached;             /* judge_build() found it already built */
};
#define CANDIDATE_INIT { .tmpdir = NULL, .so = NULL }

/* spec: NULL (the work tree), "--index", a directory with problem.json,
 * or a revision.  name: the experiment, or NULL for the current branch's.
 * 0, or after an error message -1 (its problem.json or kernel cannot be
 * read), AK_EUSAGE (a revision or directory that names no kernel) or
 * AK_EENV (no repository, no branch, no work tree). */
int candidate_load(struct candidate *c, const char *spec, const char *name);
void candidate_release(struct candidate *c);

struct judge {
	struct runner r;
	char backend[16];
	json_t *device;         /* the runner's hello (or, while pending, the
				 * last one on this machine) */
	json_t *ceilings;       /* copy bandwidth, matrix rates */
	int started;
	int pending;            /* hello not yet asked: see judge_ready() */
	double waited;          /* seconds judge_ready() waited for hello */
	double device_wait;     /* seconds waited for the device's lock */
};
#define JUDGE_INIT { .r = RUNNER_INIT }

/* 0, or AK_EENV (no device, runner missing) after an error message.  The
 * runner opens its device in the background; where this machine has said
 * hello before, that hello stands in (for the arch to build for and the
 * device's name) until judge_ready(), which judge_build() calls before it
 * loads a kernel: a build overlaps the device's start. */
int judge_start(struct judge *j, const char *backend);
/* Waits for the runner's hello: 0, or AK_EENV (no device) after an
 * error message. */
int judge_ready(struct judge *j);
void judge_stop(struct judge *j);

/* Builds c (cached) and loads it into slot (none when slot < 0, which
 * needs no judge_start()); 0, -1 when it does not build or load (verdict
 * says why, with the compiler's first errors; nothing is printed), or
 * AK_EENV when the toolchain is missing or the device did not answer
 * (after an error message). */
int judge_build(struct judge *j, struct candidate *c, int slot,
		struct strbuf *verdict);

/* The device's ceilings, measured once per device and kept in the
 * repository ($GIT_DIR/autokernel/device-<backend>-<name>-<id>.json, the
 * id the GPU's UUID or PCI bus id) or the user's cache. */
json_t *judge_ceilings(struct judge *j, int remeasure);

/* The device's name, for messages and trailers. */
const char *judge_device_name(struct judge *j);
/* A file name for this very device: "cuda-gpu-8f3a...", "host-<host>". */
void judge_device_key(struct judge *j, struct strbuf *out);

/*
 * verify_stages() and bench_workload() (verify/verify.h) on j's runner
 * with the device's lock (judge/devlock.h): shared for each call of the
 * stages (not for the host's work between calls), exclusive for the
 * benchmark; the wait is added to j->device_wait.
 * judge_run_bench_shape() is bench_fresh() at one shape and dtype (scale
 * 1, no early end).  The ceilings are the device's (judge_ceilings()).
 */
int judge_run_stages(struct judge *j, const struct problem *p,
		     struct cases *cs, int slot, json_t **result,
		     struct strbuf *verdict, FILE *progress);
int judge_run_bench(struct judge *j, const struct problem *p,
		    const int *slots, int n, double scale,
		    const struct settle *settle, json_t **result,
		    struct strbuf *verdict);
int judge_run_bench_shape(struct judge *j, const struct problem *p,
			  const struct shape *s, enum ak_dtype dt,
			  const int *slots, int n, json_t **result,
			  struct strbuf *verdict);

#endif
