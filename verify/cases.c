/*
 * cases.c: the plan of cases of the five stages and the benchmark, and
 * the thread that makes their inputs and references ahead of the stages.
 */
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "verify/cases.h"
#include "ops/dtype.h"

/* Reference work (flops) above which rows are sampled. */
#define REF_BUDGET 3e8
#define MIN_SAMPLE 64

/* ---- layout ---- */

size_t tensor_bytes(const struct ak_tensor *t)
{
	return (size_t)ak_numel(t) * dtype_size(t->dtype);
}

static size_t align_up(size_t n)
{
	return (n + 255) & ~(size_t)255;
}

/* The op's tensors at s, laid out in the shared mapping; extra_outs more
 * copies of the outputs follow (for the benchmark's other kernels). */
void layout_make(struct layout *l, const struct problem *p,
		 const struct shape *s, enum ak_dtype dt, int extra_outs)
{
	size_t off = 0;

	memset(l, 0, sizeof(*l));
	p->op->tensors(s, dt, l->in, l->out);
	for (int i = 0; i < p->op->n_in; i++) {
		l->in_off[i] = off;
		off = align_up(off + tensor_bytes(&l->in[i]));
	}
	for (int i = 0; i < p->op->n_out; i++) {
		l->out_off[i] = off;
		off = align_up(off + tensor_bytes(&l->out[i]) *
			       (size_t)(1 + extra_outs));
	}
	l->size = off ? off : 256;
}

void layout_bind(struct layout *l, unsigned char *base)
{
	for (int i = 0; i < AK_OP_MAX_IN; i++)
		l->in[i].data = base + l->in_off[i];
	for (int i = 0; i < AK_OP_MAX_OUT; i++)
		l->out[i].data = base + l->out_off[i];
}

/* ---- references ---- */

/* The rows to check: all of them, or a seeded sample with the first and
 * the last when the reference would cost more than REF_BUDGET. */
static int64_t *pick_rows(const struct op *op, const struct shape *s,
			  uint64_t seed, int64_t *n)
{
	int64_t rows = op->rows(s), *pick;
	double per_row = op->flops(s) / (double)rows;
	int64_t want = rows;
	struct rng g;

	if (op->flops(s) > REF_BUDGET) {
		want = (int64_t)(REF_BUDGET / (per_row > 1 ? per_row : 1));
		if (want < MIN_SAMPLE)
			want = MIN_SAMPLE;
		if (want > rows)
			want = rows;
	}
	pick = xmalloc(sizeof(*pick) * (size_t)(want ? want : 1));
	*n = want;
	if (want == rows) {
		for (int64_t i = 0; i < rows; i++)
			pick[i] = i;
		return pick;
	}
	rng_seed(&g, seed ^ 0x5eed5eedULL);
	pick[0] = 0;
	pick[1] = rows - 1;
	for (int64_t i = 2; i < want; i++)
		pick[i] = (int64_t)(rng_next(&g) % (uint64_t)rows);
	return pick;
}

void refs_make(struct refs *rf, const struct problem *p,
	       const struct shape *s, const struct ak_tensor *in,
	       uint64_t seed)
{
	const struct op *op = p->op;
	double scalar[4];

	memcpy(scalar, p->scalar, sizeof(scalar));
	op->scalars(s, scalar);
	rf->rows = pick_rows(op, s, seed, &rf->n);
	rf->len = op->row_len(s);
	rf->ref = xmalloc(sizeof(double) * (size_t)(rf->n * rf->len + 1));
	rf->scale = xmalloc(sizeof(double) * (size_t)(rf->n + 1));
	#pragma omp parallel for schedule(dynamic, 1) if (rf->n > 1)
	for (int64_t i = 0; i < rf->n; i++) {
		op->reference(s, in, scalar, rf->rows[i],
			      rf->ref + i * rf->len);
		rf->scale[i] = op->row_scale ?
			op->row_scale(s, in, scalar, rf->rows[i]) : 1;
	}
}

void refs_release(struct refs *rf)
{
	free(rf->rows);
	free(rf->ref);
	free(rf->scale);
	memset(rf, 0, sizeof(*rf));
}

/* ---- one case ---- */

static size_t case_bytes(const struct vcase *c)
{
	return c->in_size + (size_t)(c->refs.n * c->refs.len) * sizeof(double);
}

static void case_make(const struct problem *p, struct vcase *c)
{
	struct layout l;
	long long t0 = now_ns();
	char shape[128];

	layout_make(&l, p, c->s, c->dt, 0);
	c->in_size = p->op->n_out ? l.out_off[0] : l.size;
	/* zeroed: the padding between tensors is copied too */
	c->inputs = xcalloc(1, c->in_size ? c->in_size : 1);
	layout_bind(&l, c->inputs);
	p->op->generate(c->s, l.in, c->seed, c->g);
	refs_make(&c->refs, p, c->s, l.in, c->seed);
	shape_format(c->s, shape, sizeof(shape));
	trace("cases", "%s %s %s: made in %.2f ms", shape, dtype_name(c->dt),
	      gen_name(c->g), ms_since(t0));
}

static void case_clear(struct vcase *c)
{
	free(c->inputs);
	c->inputs = NULL;
	refs_release(&c->refs);
}

/* ---- the plan ---- */

static void add(struct cases *cs, int stage, int idx, const struct shape *s,
		enum ak_dtype dt, enum gen_kind g, int repeats)
{
	struct vcase *c = &cs->c[cs->n++];

	memset(c, 0, sizeof(*c));
	c->stage = stage;
	c->idx = idx;
	c->s = s;
	c->dt = dt;
	c->g = g;
	c->repeats = repeats;
	/* no two cases of a judgement share a seed (idx < 1009) */
	c->seed = cs->p->seed * 1000003ULL + (uint64_t)stage * 1009ULL +
		(uint64_t)idx;
}

/* The five stages (git-autokernel(1), JUDGING): smoke at the smoke shape; every test shape and dtype;
 * the op's stability transforms at the first test shape; three runs for
 * determinism; every edge shape and dtype. */
static void plan(struct cases *cs, int bench_dt)
{
	const struct problem *p = cs->p;
	const struct shape *first = p->n_test ? &p->test[0] : &p->smoke;
	int i = 0;

	cs->c = xcalloc((size_t)(4 + (p->n_test + p->n_edge + GEN_KINDS) *
				 p->n_dtypes), sizeof(*cs->c));
	cs->first[0] = cs->n;
	add(cs, 0, 0, &p->smoke, p->dtypes[0], GEN_NORMAL, 1);
	cs->first[1] = cs->n;
	for (int s = 0; s < p->n_test; s++)
		for (int d = 0; d < p->n_dtypes; d++, i++)
			add(cs, 1, i, &p->test[s], p->dtypes[d],
			    (s + d) % 3 == 2 ? GEN_UNIFORM : GEN_NORMAL, 1);
	cs->first[2] = cs->n;
	i = 0;
	for (int g = GEN_LARGE; g < GEN_KINDS; g++) {
		if (!(p->op->stability & (1u << g)))
			continue;
		for (int d = 0; d < p->n_dtypes; d++, i++)
			add(cs, 2, i, first, p->dtypes[d], (enum gen_kind)g, 1);
	}
	cs->first[3] = cs->n;
	add(cs, 3, 0, first, p->dtypes[0], GEN_NORMAL, 3);
	cs->first[4] = cs->n;
	i = 0;
	for (int s = 0; s < p->n_edge; s++)
		for (int d = 0; d < p->n_dtypes; d++, i++)
			add(cs, 4, i, &p->edge[s], p->dtypes[d], GEN_NORMAL, 1);
	cs->first[5] = cs->n;
	/* the benchmark makes its inputs afresh on the device, call by
	 * call (bench.c): nothing to make ahead */
	cs->bench_dt = bench_dt;
	cs->first[6] = cs->n;
}

/* The largest mapping a case needs: sized once, the runner maps the
 * tensors once and their pages are faulted in once. */
static size_t cases_mapping_size(const struct cases *cs)
{
	size_t most = 0;

	for (int i = 0; i < cs->n; i++) {
		const struct vcase *c = &cs->c[i];
		struct layout l;

		layout_make(&l, cs->p, c->s, c->dt, 0);
		if (l.size > most)
			most = l.size;
	}
	for (int i = 0; cs->bench_dt >= 0 && i < cs->p->n_work; i++) {
		size_t b = bench_mapping_size(cs->p, &cs->p->work[i].s,
					      cs->p->work[i].dt);

		if (b > most)
			most = b;
	}
	return most;
}

void cases_map(struct cases *cs, struct runner *r)
{
	long long t0 = now_ns();

	runner_shm(r, cases_mapping_size(cs));
	trace("cases", "%zu MB of tensors mapped in %.2f ms",
	      r->shm_size >> 20, ms_since(t0));
}

/* ---- the thread ---- */

/* Makes c, a planned case, called with the lock held: the lock is let
 * go while it is made, so the other side can take cases meanwhile. */
static void make_released(struct cases *cs, struct vcase *c)
{
	c->state = CASE_MAKING;
	pthread_mutex_unlock(&cs->lock);
	case_make(cs->p, c);
	pthread_mutex_lock(&cs->lock);
	c->state = CASE_READY;
	cs->held += case_bytes(c);
	pthread_cond_broadcast(&cs->changed);
}

static void *make_ahead(void *arg)
{
	struct cases *cs = arg;

	/* OpenMP's thread count is per thread: the judge's setting */
	omp_set_num_threads(cs->threads);
	pthread_mutex_lock(&cs->lock);
	for (int i = 0; i < cs->n && !cs->stop; i++) {
		struct vcase *c = &cs->c[i];

		while (!cs->stop && cs->held > cs->budget)
			pthread_cond_wait(&cs->changed, &cs->lock);
		if (!cs->stop && c->state == CASE_PLANNED)
			make_released(cs, c);
	}
	pthread_mutex_unlock(&cs->lock);
	return NULL;
}

struct cases *cases_plan(const struct problem *p, int bench_dt, int threaded)
{
	struct cases *cs = xcalloc(1, sizeof(*cs));
	long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);

	cs->p = p;
	cs->threads = omp_get_max_threads();
	cs->budget = CASES_BUDGET;
	if (pages > 0 && psize > 0 && (size_t)pages * (size_t)psize / 8 <
	    cs->budget)
		cs->budget = (size_t)pages * (size_t)psize / 8;
	plan(cs, bench_dt);
	pthread_mutex_init(&cs->lock, NULL);
	pthread_cond_init(&cs->changed, NULL);
	if (threaded && !pthread_create(&cs->thread, NULL, make_ahead, cs))
		cs->have_thread = 1;
	return cs;
}

struct cases *cases_start(const struct problem *p, int bench_dt)
{
	return cases_plan(p, bench_dt, 1);
}

/* Case i ready: made by the thread (waited for), or here when the thread
 * has not come to it. */
struct vcase *cases_get(struct cases *cs, int i)
{
	struct vcase *c = &cs->c[i];
	long long t0 = now_ns();

	pthread_mutex_lock(&cs->lock);
	while (c->state == CASE_MAKING)
		pthread_cond_wait(&cs->changed, &cs->lock);
	/* planned and not reached by the thread, or used and asked again */
	if (c->state != CASE_READY)
		make_released(cs, c);
	pthread_mutex_unlock(&cs->lock);
	trace("cases", "case %d of stage %d ready after %.2f ms", c->idx,
	      c->stage, ms_since(t0));
	return c;
}

void cases_put(struct cases *cs, int i)
{
	struct vcase *c = &cs->c[i];

	pthread_mutex_lock(&cs->lock);
	if (c->state == CASE_READY) {
		cs->held -= case_bytes(c);
		case_clear(c);
		c->state = CASE_USED;
		pthread_cond_broadcast(&cs->changed);
	}
	pthread_mutex_unlock(&cs->lock);
}

void cases_halt(struct cases *cs)
{
	pthread_mutex_lock(&cs->lock);
	cs->stop = 1;
	pthread_cond_broadcast(&cs->changed);
	pthread_mutex_unlock(&cs->lock);
	if (cs->have_thread)
		pthread_join(cs->thread, NULL);
	cs->have_thread = 0;
}

void cases_free(struct cases *cs)
{
	if (!cs)
		return;
	cases_halt(cs);
	for (int i = 0; i < cs->n; i++)
		case_clear(&cs->c[i]);
	pthread_mutex_destroy(&cs->lock);
	pthread_cond_destroy(&cs->changed);
	free(cs->c);
	free(cs);
}
