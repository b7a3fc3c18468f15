/*
 * cases.h: the cases the five stages and the benchmark run, with their
 * inputs and fp64 references.  Inside the verify module only.
 *
 * Nothing in a case depends on the kernel, so a judge plans them before
 * it compiles the candidate and a thread of their own makes them while
 * the compiler runs (verify.h: cases_start()).  The stages then take
 * each case ready, in order:
 *
 *	struct cases *cs = cases_plan(&p, AK_F16, 1);   // 1: on a thread
 *	for (i = cs->first[stage]; i < cs->first[stage + 1]; i++) {
 *		struct vcase *c = cases_get(cs, i);     // waits, or makes it
 *		memcpy(mapping, c->inputs, c->in_size);
 *		... call, then compare with c->refs ...
 *		cases_put(cs, i);                       // frees its memory
 *	}
 *	cases_free(cs);                         // stops and joins the thread
 *
 * The thread stays at most CASES_BUDGET bytes ahead of the stages (less
 * on a small machine), so a problem with large shapes holds no more than
 * that besides the case in use.
 */
#ifndef CASES_H
#define CASES_H

#include <pthread.h>
#include "verify/verify.h"

/* The op's tensors at one shape, laid out in the runner's mapping:
 * inputs first, then outputs (with copies for the benchmark's other
 * kernels). */
struct layout {
	struct ak_tensor in[AK_OP_MAX_IN], out[AK_OP_MAX_OUT];
	size_t in_off[AK_OP_MAX_IN], out_off[AK_OP_MAX_OUT], size;
};

size_t tensor_bytes(const struct ak_tensor *t);
void layout_make(struct layout *l, const struct problem *p,
		 const struct shape *s, enum ak_dtype dt, int extra_outs);
void layout_bind(struct layout *l, unsigned char *base);

/* The rows a comparison checks and their fp64 reference: row rows[i] is
 * ref[i * len .. i * len + len - 1], its tolerance scale scale[i]. */
struct refs {
	int64_t n, len, *rows;
	double *ref, *scale;
	int packed;     /* the output holds only these rows, in this order */
};

/* Rows to check (all, or a seeded sample) and their reference, from the
 * inputs in (made with seed). */
void refs_make(struct refs *rf, const struct problem *p,
	       const struct shape *s, const struct ak_tensor *in,
	       uint64_t seed);
void refs_release(struct refs *rf);

enum case_state { CASE_PLANNED, CASE_MAKING, CASE_READY, CASE_USED };

struct vcase {
	int stage, idx, repeats;        /* stage 5: the benchmark */
	const struct shape *s;
	enum ak_dtype dt;
	enum gen_kind g;
	uint64_t seed;
	enum case_state state;
	unsigned char *inputs;          /* the mapping's first in_size bytes */
	size_t in_size;
	struct refs refs;
};

#define CASES_BUDGET ((size_t)1 << 30)
#define BENCH_STAGE 5

struct cases {
	const struct problem *p;        /* outlives the cases */
	struct vcase *c;
	int n, first[BENCH_STAGE + 2];  /* stage k: [first[k], first[k + 1]) */
	int bench_dt;                   /* the benchmark's dtype, or -1 */
	int threads;                    /* OpenMP threads for making */
	pthread_t thread;
	int have_thread, stop;
	pthread_mutex_t lock;
	pthread_cond_t changed;
	size_t held, budget;
};


/* The mapping a benchmark of p at s in dt needs: tensors, check area. */
size_t bench_mapping_size(const struct problem *p, const struct shape *s,
			  enum ak_dtype dt);

/* The runner's request for layout l of p at s: "call", "bench", "gen". */
json_t *layout_request(struct runner *r, const struct problem *p,
		       const struct layout *l, const struct shape *s,
		       const char *req);
/* "y[3,5]": element idx of out, named as the op names its output. */
void element_name(const struct problem *p, const struct ak_tensor *out,
		  int64_t idx, char *buf, size_t n);
/* out, the output at s of inputs of dtype dt, against the reference rf:
 * every element written, finite, within tolerance, and not a constant
 * where the reference varies.  0 pass, 1 fail (why says how); the rows'
 * figures go into cj. */
int refs_compare(const struct problem *p, const struct shape *s,
		 enum ak_dtype dt, const struct ak_tensor *out,
		 const struct refs *rf, json_t *cj, struct strbuf *why);

/* The cases of p's stages and, with bench_dt >= 0, of its benchmark at
 * that dtype; made on a thread when threaded, else by cases_get(). */
struct cases *cases_plan(const struct problem *p, int bench_dt, int threaded);
struct vcase *cases_get(struct cases *cs, int i);
void cases_put(struct cases *cs, int i);
/* Stops the thread (after the case it is making); cases_get() still
 * makes any case asked for. */
void cases_halt(struct cases *cs);

#endif
