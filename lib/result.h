/*
 * result.h: the result of one judgement, as the note of a commit or an
 * attempt holds it (refs/notes/autokernel, records.h), typed.  This is
 * the one place the note's schema is spelled: every reader of a note (or
 * of a pending result, the same object before it is a note) goes through
 * result_from_note(), and a judgement is written by result_to_note().
 *
 *	struct result r = RESULT_INIT;
 *	json_t *note = note_read(&commit_id);   // NULL: unverified
 *	result_from_note(&r, note);             // r takes its own reference
 *	json_decref(note);
 *	if (r.keep == 1 && r.time_us > 0) ... r.shapes[0].median_us ...
 *	result_release(&r);
 *
 *	struct result r = RESULT_INIT;          // a note made here
 *	r.keep = 0;
 *	r.status = "rejected";
 *	r.reason = "agent";
 *	r.verdict = why.buf;
 *	note = result_to_note(&r);              // the caller's reference
 *
 * THE NOTE
 *
 * A JSON object, written with sorted keys (note_write()).  Its writers:
 * judge/staged.c (experiment_judge(): one judgement, everything below
 * unless said otherwise), judge/hooks.c and bin/cmd-judge-job.c (what
 * happened to it), judge/loop.c (a candidate that never reached a commit:
 * version, tool, name, keep, status, reason, verdict), lib/records.c
 * (note_from_trailers(): a commit whose note was not fetched, from its
 * Autokernel-* trailers: source, status, verify, op, backend, device.name,
 * time_us, speedup, roofline, and a rejection's reason and verdict),
 * bench --torch --record (torch) and e2e --record (e2e).  Key by key,
 * with the field of struct result that reads it:
 *
 *   version       1                                      .version
 *   tool          the judge's version (AK_VERSION)       .tool
 *   name          the experiment, <name>/ in the tree    .name
 *   op, backend   the op judged and its backend          .op, .backend
 *   kernel_path   "<name>/<kernel>"                      .kernel_path
 *   tree          the staged tree judged                 .tree
 *   head          the commit it was judged against (null for the
 *                 baseline); baseline: the baseline's commit
 *   problem       problem.json as ops/ reads it (problem_dump());
 *                 its "dtypes", the dtypes verified      .dtypes
 *   device        the runner's device: name, arch, sms, cores, driver
 *                 ... (its hello)                        .device,
 *                                                        .device_name,
 *                                                        .device_arch
 *   ceilings      the device and its measured copy and matrix rates:
 *                 {device, copy_gbps, matrix_tflops, matrix_method}
 *                 (judge_ceilings())                     .ceilings
 *   sandbox       false when judged outside the cell (lib/cell.h)
 *   agent, tokens the run loop's agent and its usage {input, output}
 *                                                        .tokens,
 *                                                        .tokens_in,
 *                                                        .tokens_out
 *   verify        the five stages: {pass, stages_passed, stages,
 *                 seconds, and a failure's verdict}
 *                                                        .verify_pass,
 *                                                        .stages_passed
 *   workload      the interleaved benchmark: {total: {candidate_us,
 *                 best_us, baseline_us, floor_us, noise_us, apart},
 *                 shapes: [a bench per shape, each with its weight]}
 *                                                        .shapes
 *   bench         workload.shapes[0], for the readers of the notes
 *                 made before workloads: {shape, dtype, weight,
 *                 kernels: [the candidate, HEAD, the baseline, each
 *                 {median_us, q1_us, q3_us, min_us, n, roofline}], copy,
 *                 floor_us, floor_kind, bytes, flops, seed, checked}
 *                                                        .bench
 *   rejudged      {head_ratio, time_us} of the first run of a candidate
 *                 judged again (more than ten times faster than HEAD)
 *   time_us       the candidate's weighted total over the workload
 *                                                        .time_us
 *   speedup       the baseline's total over it, or HEAD's when the
 *                 baseline's kernel no longer builds; 1 on the baseline
 *                                                        .speedup
 *   roofline      the floor's total over it              .roofline
 *   head_ratio    HEAD's total over it, timed in the same run: what the
 *                 keep rule decided on; not on the baseline
 *                                                        .head_ratio
 *   keep          true or false                          .keep
 *   status        baseline, kept, rejected (unverified: the stand-in
 *                 of an amend of an unverified HEAD)     .status
 *   reason        a rejection's: build, verify, integrity, slower,
 *                 noise, shape; agent, scope, interrupted, job ... for
 *                 judge/loop.c's                         .reason
 *   verdict       what the judge said, one line or a build log
 *                                                        .verdict
 *   seconds, device_wait_s   how long judging took, and waited for
 *                 another judge's device lock
 *   attempt       a rejection's attempt number (judge/hooks.c)
 *                                                        .attempt
 *   reworded      true: HEAD's tree again, HEAD's result (judge/hooks.c)
 *                                                        .reworded
 *   approved      true once commit-msg let it through; in the pending
 *                 result only, removed before the note is written
 *                                                        .approved
 *   commit        the commit it is the note of (post-commit)
 *   judged_by     who judged it for run --slurm (cmd-judge-job.c)
 *                                                        .judged_by
 *   source        "trailers" for note_from_trailers()'s
 *   torch         PyTorch's op timed beside the kernel (bench --torch
 *                 --record; its schema is in report/report.h)
 *                                                        .torch
 *   e2e           a model's time and accuracy with the kernels (e2e
 *                 --record, export/e2e.h)
 *   references    optional, by hand: other implementations' timings
 *                 ([{name, median_us}] or {name: us}; report/report.h)
 *                                                        .references
 *
 * READING OLD NOTES
 *
 * A note without "workload" (made before workloads) is one shape of
 * weight 1: its "bench".  A note from trailers has only verify and
 * device.name of the objects: no shapes, an empty bench.  The deciding
 * ratio of a note without "head_ratio" is its bench's, HEAD's median over
 * the candidate's; result_reason() says "noise" for an older note that
 * said "slower" for a verdict within the noise or under minGain.
 *
 * WRITING
 *
 * judge/staged.c fills in the judgement's fields of a struct result as
 * it judges, collects the objects of the other parts in r.note, and
 * makes the note with result_to_note(); judge/hooks.c makes its stand-in
 * for an unverified HEAD the same way.  Written by key still, and why:
 * the hooks' and judge-job's own keys (attempt, reworded, approved,
 * commit, judged_by) are edits of the pending result as the commit goes
 * through, one key more or, for approved, less, which result_to_note()
 * cannot take away; judge/loop.c's note is one json_pack(), whose bytes
 * result_to_note() would match except for a verdict that is not UTF-8,
 * where json_pack() makes no note at all and result_to_note() one without
 * the verdict; torch and e2e are objects of their own set into a note
 * (note_set(), export/e2e.c); and note_from_trailers() reads a commit
 * message, not a judgement.
 */
#ifndef RESULT_H
#define RESULT_H

#include <jansson.h>

/* One shape of the workload, as the candidate ran it. */
struct result_shape {
	const char *shape, *dtype;      /* "16x1024", "f32"; NULL if absent */
	double weight;                  /* its share of time_us; 0 if absent */
	double median_us;               /* the candidate's median */
	double roofline;                /* the floor over that median */
	double floor_us;                /* the time at the device's ceiling */
};

/* The note's "bench": the first shape's run; zeros and NULLs if none. */
struct result_bench {
	const char *shape, *dtype;      /* shape NULL: the note has no bench */
	int kernels;                    /* how many were timed, 0 to 3 (a
					 * longer array's first three) */
	double median_us[3];            /* the candidate, HEAD, baseline */
	double floor_us;
	const char *floor_kind;         /* "copy" or "matrix" */
	double bytes, flops;            /* the op's minimum traffic, work */
};

/* Which numbers the note has (a number of 0 is not an absent one);
 * RESULT_HAS_HEAD_RATIO: its own "head_ratio", above 0. */
#define RESULT_HAS_TIME_US      (1u << 0)
#define RESULT_HAS_SPEEDUP      (1u << 1)
#define RESULT_HAS_ROOFLINE     (1u << 2)
#define RESULT_HAS_HEAD_RATIO   (1u << 3)

/*
 * Strings and json_t pointers are borrowed: from r.note when read by
 * result_from_note(), from the caller when it fills r in for
 * result_to_note() (they must outlive that call).  A string is NULL and
 * a number 0 where the note has none, unless said otherwise.
 */
struct result {
	json_t *note;           /* the note read, or what result_to_note()
				 * writes over; r holds a reference */
	int version;            /* 0: absent */
	const char *tool, *name, *op, *backend, *kernel_path, *tree;
	const char *status;
	int keep;               /* 1 kept, 0 rejected, -1 absent */
	const char *reason, *verdict;

	unsigned has;           /* RESULT_HAS_*: which of these four */
	double time_us, speedup, roofline;
	/* HEAD's median over the candidate's in the same run (>1: faster):
	 * "head_ratio" when above 0, else the bench's kernels 1 over 0, else
	 * 0 (the baseline; a build or verify failure; trailers) */
	double head_ratio;

	int verify_pass;        /* 1 passed, 0 failed, -1 no "verify" */
	int stages_passed;      /* of five; 0 if absent */

	struct result_bench bench;
	struct result_shape *shapes;    /* every shape timed, owned */
	size_t nr_shapes;

	/* views of r.note's objects: read only, result_to_note() writes
	 * none of them */
	const char *device_name, *device_arch;
	json_t *device, *ceilings, *dtypes, *tokens, *torch, *references;
	long long tokens_in, tokens_out;

	/* what the hooks added (read only) */
	int attempt;            /* 0: none */
	int reworded, approved; /* 1 when true */
	const char *judged_by;
};
#define RESULT_INIT { .keep = -1, .verify_pass = -1 }

/*
 * Reads note into r; r's old contents are overwritten, not freed.  The
 * numbers may be integers or reals in the note, but version,
 * stages_passed, attempt and the tokens' are integers; a value of
 * another type is taken as absent.  A shape whose row lacks shape, dtype,
 * floor_us or its candidate's median_us or roofline is left out (its run
 * did not finish).  0, or -1 when note is NULL (r is then RESULT_INIT:
 * nothing is known, r.note is NULL).
 */
int result_from_note(struct result *r, json_t *note);

/*
 * A new note: r.note's keys (none when NULL), then each field of the
 * judgement that r has set written over them: version above 0; the
 * strings tool to verdict when not NULL; keep when 0 or 1; the four
 * numbers with their RESULT_HAS_* bit (a number json_real() cannot hold,
 * the infinite time of a kernel with no median, is left out).  A field
 * equal to what r.note says is left as r.note has it, so a note read and
 * written back keeps every byte.  Everything else goes through from
 * r.note as it is: the objects (workload, bench, verify, device ...),
 * and what judge/hooks.c and bin/cmd-judge-job.c add to the pending
 * result (attempt, reworded, approved, commit, judged_by: keys of its
 * own, set and removed as the commit goes through).  The caller owns the
 * result.
 */
json_t *result_to_note(const struct result *r);

/*
 * The note's own number under key ("time_us", "speedup", "roofline"), as
 * the note wrote it (an integer stays one), for the readers that pass
 * figures on (log --json, report --format json, the export manifest); a
 * new reference, or NULL when the note has none (its RESULT_HAS_* bit is
 * clear).
 */
json_t *result_figure(const struct result *r, const char *key);

/* Frees r's shapes and its reference to the note; r is RESULT_INIT. */
void result_release(struct result *r);

/* The short reason of a rejection, "" when none: r.reason, but "noise"
 * for an older note that said "slower" for a verdict within the noise
 * or under autokernel.minGain ("not faster ...", "gain ..."). */
const char *result_reason(const struct result *r);

/* The kernel against its floor (roofline = floor / time), the floor
 * called `floor`, into buf: "87% of it", or "1.09x faster than it" where
 * a kernel beats its floor (a same-size copy is mostly ramp at small
 * sizes); buf. */
const char *result_floor_words(double roofline, const char *floor, char *buf,
			       size_t n);

#endif
