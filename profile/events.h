/*
 * events.h: a parsed chrome trace, as profile/trace.c builds it and the
 * recognizers of profile/pattern.c read it.  Private to profile/.
 *
 * Every event of interest is one struct ev in trace.ev.  CPU events (ops,
 * Python scopes, runtime calls) are listed by thread and time in
 * trace.cpu, and each knows its enclosing CPU event (parent); each kernel
 * knows the CPU event that launched it (link).  The outermost ops of a
 * thread, those no other op encloses ("top"), are what a model's code
 * called, in order: the recognizers match sequences of them (a pow, a
 * mean, an add, an rsqrt and a mul are one RMSNorm) and record each match
 * as a run; every kernel under a run's ops counts as one call of the
 * run's op, at the run's shape.
 */
#ifndef PROFILE_EVENTS_H
#define PROFILE_EVENTS_H

#include <jansson.h>
#include "profile/profile.h"

enum ev_kind { EV_SCOPE, EV_OP, EV_RUNTIME, EV_KERNEL };

struct ev {
	double ts, end;
	uint64_t thread;        /* pid and tid */
	const char *name;       /* borrowed from the parsed trace */
	json_t *args;
	int kind;
	int parent;             /* enclosing CPU event, or -1 */
	int pos;                /* index in trace.cpu */
	int map;                /* prof_map_event(), for CPU events */
	int top;                /* an op that no op encloses */
	int run;                /* the run it is part of (trace.runs), or -1 */
	int confirmed;          /* named scopes: -1 unknown, else contents */
	int back;               /* part of a backward pass: -1 unknown */
	int down;               /* a SwiGLU's down projection */
	int link;               /* kernels: the CPU event that launched it */
	uint32_t seen;          /* as an anchor: the ops it counted a call of */
	int shape_op;           /* the op the cached shape is for, or -1 */
	int shape_ok, dt_known, layout;
	struct shape shape;
	enum ak_dtype dt;
};

/* A recognized sequence of top ops: one call of an op, or named glue. */
struct run {
	int opi;                /* op index, or -1: not covered, as label */
	const char *label;      /* what it is, for "not covered" */
	int head;               /* its first op: the call is counted on it */
	int shape_ok, dt_known;
	int layout;             /* rotary_embedding: ROTARY_*, else -1 */
	struct shape shape;
	enum ak_dtype dt;
};

struct key {
	uint64_t k;
	double ts;
	uint64_t thread;
	int ev;
};

struct trace {
	json_t *root;
	struct ev *ev;
	size_t nr, alloc;
	int *cpu, *gpu;                 /* sorted by thread, then time */
	size_t nr_cpu, nr_gpu;
	struct key *corr, *ext, *fs, *ff;
	size_t nr_corr, nr_ext, nr_fs, nr_ff;
	size_t alloc_corr, alloc_ext, alloc_fs, alloc_ff;
	struct run *runs;
	size_t nr_runs, alloc_runs;
};

/* "pow" for "aten::pow", NULL for any other event. */
const char *ev_aten(const struct ev *v);

/*
 * Marks the top ops and matches the recognizers of pattern.c on every
 * thread's sequence of them: the ops of a match get ev.run.
 */
void trace_find_runs(struct trace *t);

#endif
