/*
 * bench.c: the interleaved benchmark with fresh inputs for every call and
 * every call's output checked (doc/runner-protocol.md), the speed of light
 * measured in the same run, and the keep rule.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "ops/dtype.h"
#include "verify/cases.h"

#define BENCH_WARMUP 3
#define BENCH_MIN_ITERS 15
/* Rounds at most, for one shape at scale 1: a workload's shapes share
 * them as they share the time budget, and a candidate judged again gets
 * twice as many.  Fast kernels reach this before the time budget, so it
 * is what bounds a benchmark's wall time on a GPU. */
#define BENCH_ITERS 400

/* ---- benchmark ---- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double quantile(const double *v, size_t n, double q)
{
	double pos = q * (double)(n - 1);
	size_t i = (size_t)pos;
	double f = pos - (double)i;

	if (i + 1 >= n)
		return v[n - 1];
	return v[i] * (1 - f) + v[i + 1] * f;
}

/* {median, q1, q3, n, min} of a JSON array of microseconds. */
static json_t *stats(json_t *samples)
{
	size_t n = json_array_size(samples);
	double *v;
	json_t *s;

	if (!n)
		return json_pack("{s:i}", "n", 0);
	v = xmalloc(sizeof(double) * n);
	for (size_t i = 0; i < n; i++)
		v[i] = json_number_value(json_array_get(samples, i));
	qsort(v, n, sizeof(double), cmp_double);
	s = json_pack("{s:f,s:f,s:f,s:f,s:I}", "median_us", quantile(v, n, 0.5),
		      "q1_us", quantile(v, n, 0.25), "q3_us", quantile(v, n, 0.75),
		      "min_us", v[0], "n", (json_int_t)n);
	free(v);
	return s;
}

static double num(json_t *o, const char *key)
{
	return json_number_value(json_object_get(o, key));
}

/*
 * Where the runner's schedule put each of a kernel's calls
 * (doc/runner-protocol.md): its stratum a * n + b for its tags a (of
 * tags_a) and b (of tags_b), each in [0, n), or a alone without tags_b.
 * NULL where the tags do not fit the timings.
 */
static int *strata_of(json_t *samples, json_t *tags_a, json_t *tags_b, int n)
{
	size_t count = json_array_size(samples);
	int *key;

	if (n < 2 || n > AK_WIRE_SLOTS || !count ||
	    json_array_size(tags_a) != count ||
	    (tags_b && json_array_size(tags_b) != count))
		return NULL;
	key = xmalloc(sizeof(int) * count);
	for (size_t i = 0; i < count; i++) {
		json_int_t a = json_integer_value(json_array_get(tags_a, i));
		json_int_t b = tags_b ?
			json_integer_value(json_array_get(tags_b, i)) : 0;

		if (a < 0 || a >= n || b < 0 || b >= n) {
			free(key);
			return NULL;
		}
		key[i] = (int)(tags_b ? a * n + b : a);
	}
	return key;
}

/* The calls of each stratum into part[] (NULL for none). */
static void split_calls(json_t *samples, const int *key, int parts,
			json_t **part)
{
	size_t i;
	json_t *v;

	for (int k = 0; k < parts; k++)
		part[k] = NULL;
	json_array_foreach(samples, i, v) {
		if (!part[key[i]])
			part[key[i]] = json_array();
		json_array_append(part[key[i]], v);
	}
}

/* The medians of a kernel's calls by one tag (their set of buffers, or
 * their position in the round), for the note: what the turns averaged
 * away.  NULL where the runner said nothing of it. */
static json_t *medians_by(json_t *samples, json_t *tags, int n)
{
	json_t *part[AK_WIRE_SLOTS], *out;
	int *key = strata_of(samples, tags, NULL, n);

	if (!key)
		return NULL;
	split_calls(samples, key, n, part);
	free(key);
	out = json_array();
	for (int k = 0; k < n; k++) {
		json_t *st = stats(part[k]);
		json_t *med = json_object_get(st, "median_us");

		json_array_append_new(out, med ? json_copy(med) : json_null());
		json_decref(st);
		json_decref(part[k]);
	}
	return out;
}

/*
 * A kernel's statistics over the strata of the runner's schedule (each
 * call's set of buffers and position in its round).  The median is the
 * mean of the strata's medians, so that a set or a position slower for
 * every kernel moves each kernel alike, where the median of all the
 * calls, drawn from two such modes, may land anywhere between them; the
 * quartiles are the median's plus those of every call's distance from
 * its stratum's median: the spread within strata, over all the calls.
 * n and min_us are over all the calls.  stats() of all the calls where
 * the runner gave no tags or a stratum has fewer than STRATUM_MIN calls,
 * too few for a median that an outlier cannot move.
 */
#define STRATUM_MIN 5
static json_t *stats_strata(json_t *samples, json_t *sets, json_t *positions,
			    int n)
{
	json_t *part[AK_WIRE_SLOTS * AK_WIRE_SLOTS], *all = stats(samples);
	double med[AK_WIRE_SLOTS * AK_WIRE_SLOTS], centre = 0, *d;
	size_t count = json_array_size(samples), i;
	int used = 0, few = 0, *key = strata_of(samples, sets, positions, n);
	json_t *v;

	if (!key)
		return all;
	split_calls(samples, key, n * n, part);
	for (int k = 0; k < n * n; k++) {
		json_t *st;

		if (!part[k])
			continue;
		few |= json_array_size(part[k]) < STRATUM_MIN;
		st = stats(part[k]);
		med[k] = num(st, "median_us");
		centre += med[k];
		used++;
		json_decref(st);
		json_decref(part[k]);
	}
	if (few || used < n * n) {
		free(key);
		return all;
	}
	centre /= used;
	d = xmalloc(sizeof(double) * count);
	json_array_foreach(samples, i, v)
		d[i] = json_number_value(v) - med[key[i]];
	free(key);
	qsort(d, count, sizeof(double), cmp_double);
	json_object_set(all, "median_all_us", json_object_get(all, "median_us"));
	json_object_set_new(all, "median_us", json_real(centre));
	json_object_set_new(all, "q1_us", json_real(centre +
						    quantile(d, count, 0.25)));
	json_object_set_new(all, "q3_us", json_real(centre +
						    quantile(d, count, 0.75)));
	json_object_set_new(all, "strata", json_integer(used));
	free(d);
	return all;
}

static double floor_us(const struct problem *p, const struct shape *s,
		       enum ak_dtype dt, double copy_us, json_t *ceilings,
		       const char **kind)
{
	double rate = json_number_value(json_object_get(json_object_get(
		ceilings, "matrix_tflops"), dtype_name(dt)));
	double t;

	*kind = "copy";
	if (!p->op->compute_bound || rate <= 0)
		return copy_us;
	t = p->op->flops(s) / (rate * 1e6);
	if (t > copy_us) {
		*kind = "matrix";
		return t;
	}
	return copy_us;
}

/*
 * Under what time a measurement is impossible.  A matrix floor is the
 * flops at the device's measured rate: 80% of it.  A copy floor is the
 * time of a same-size copy, which at small sizes is mostly ramp: a
 * kernel that only reads (reduce) ramps faster and may beat it, so the
 * bound is the op's bytes at the device's large-copy bandwidth (80% of
 * that time), or half the fastest same-size copy, whichever is larger.
 * The fastest, not the median: on the H200 a 1 MB copy takes 4.5 us,
 * yet in one benchmark at 64x4096 the copy's median came out 10.24 us
 * and called an honest 4.96 us kernel impossible (2026-12-04).
 */
static double impossible_under(const struct problem *p, const struct shape *s,
			       enum ak_dtype dt, double fl, const char *kind,
			       double copy_min, json_t *ceilings)
{
	double gbps = json_number_value(json_object_get(ceilings, "copy_gbps"));
	double bw;

	if (!strcmp(kind, "matrix"))
		return 0.8 * fl;
	if (gbps <= 0)
		return 0.8 * copy_min;
	/* the bytes of the shape timed, not of the bench shape: a
	 * workload's small shapes are not held to its largest's bytes */
	bw = 0.8 * p->op->bytes(s, dt) / (gbps * 1e3);
	return bw > 0.5 * copy_min ? bw : 0.5 * copy_min;
}

/* ---- fresh inputs, checked calls ---- */

/* Rows checked after every timed call (all of them when fewer), and the
 * spots of every input compared with what was generated. */
#define CHECK_ROWS 16
#define SPOTS 2
#define SPOT_LEN 32

/* The parent's side of one benchmark. */
struct fresh {
	const struct problem *p;
	const struct shape *s;
	enum ak_dtype dt;
	struct layout l;                /* in the mapping, then the check area */
	struct ak_gen gen[AK_OP_MAX_IN];
	struct ak_tensor in[AK_OP_MAX_IN];   /* host copies for the reference */
	uint16_t *table[AK_OP_MAX_IN];  /* a 16-bit normal input's ak_gen_table() */
	double scalar[4];
	int64_t rows, len, nrows;       /* rows of the output; checked a call */
	int64_t row[CHECK_ROWS];        /* this call's rows */
	int64_t spot[AK_OP_MAX_IN][SPOTS];
	int64_t spot_n[AK_OP_MAX_IN];
	unsigned char *base;            /* the mapping */
	size_t check_off, check_bytes;
	struct rng pick;                /* seeded from the system's entropy */
	int lockstep, n_slots, failed;
	long long calls, t0, wall_ns, check_ns;
	struct strbuf why;
	/* the candidate's and the best's times so far, for settled() */
	int slot[2];
	double *t[2];
	const struct settle *settle;    /* NULL: never */
	size_t nt[2], alloc[2];
	int settled;
};

/* A seed no kernel can know: from the kernel's entropy pool. */
static uint64_t secret_seed(void)
{
	uint64_t v = 0;
	FILE *f = fopen("/dev/urandom", "rb");

	if (!f || fread(&v, sizeof(v), 1, f) != 1)
		v = (uint64_t)now_ns() ^ ((uint64_t)getpid() << 32);
	if (f)
		fclose(f);
	return v;
}

static int64_t spot_len(const struct ak_tensor *t)
{
	int64_t n = ak_numel(t);

	return n < SPOT_LEN ? n : SPOT_LEN;
}

/* The check area: nrows output rows and the input spots, twice (the
 * parent checks call k while the runner goes on with k + 1). */
static size_t check_area(const struct problem *p, const struct layout *l,
			 int64_t nrows, int64_t len)
{
	size_t n = (size_t)(nrows * len) * dtype_size(l->out[0].dtype);

	for (int i = 0; i < p->op->n_in; i++)
		n += (size_t)(SPOTS * spot_len(&l->in[i])) *
			dtype_size(l->in[i].dtype);
	return (n + 255) & ~(size_t)255;
}

size_t bench_mapping_size(const struct problem *p, const struct shape *s,
			  enum ak_dtype dt)
{
	struct layout l;
	int64_t rows = p->op->rows(s);

	layout_make(&l, p, s, dt, 0);
	return l.size + 2 * check_area(p, &l, rows < CHECK_ROWS ? rows :
				       CHECK_ROWS, p->op->row_len(s));
}

static int fresh_init(struct fresh *f, struct runner *r,
		      const struct problem *p, const struct shape *s,
		      enum ak_dtype dt, int n_slots)
{
	memset(f, 0, sizeof(*f));
	strbuf_init(&f->why, 0);
	f->p = p;
	f->s = s;
	f->dt = dt;
	f->n_slots = n_slots;
	/* The parent's checking threads would share the CPU with a timed
	 * call wherever the runner's host is inside the timed interval: the
	 * host backend's kernels, and a runner that launches from Python
	 * between its events (its hello says "host_timed").  There each
	 * call is checked before the next one starts. */
	f->lockstep = !strcmp(p->backend, "host") ||
		json_is_true(json_object_get(r->hello, "host_timed"));
	if (f->lockstep)
		trace("bench", "lockstep: each call checked before the next");
	layout_make(&f->l, p, s, dt, 0);
	f->rows = p->op->rows(s);
	f->len = p->op->row_len(s);
	f->nrows = f->rows < CHECK_ROWS ? f->rows : CHECK_ROWS;
	f->check_off = f->l.size;
	f->check_bytes = check_area(p, &f->l, f->nrows, f->len);
	f->base = runner_shm(r, f->check_off + 2 * f->check_bytes);
	layout_bind(&f->l, f->base);
	op_bench_gen(p->op, s, dt, f->gen);
	memcpy(f->scalar, p->scalar, sizeof(f->scalar));
	p->op->scalars(s, f->scalar);
	for (int i = 0; i < p->op->n_in; i++) {
		f->in[i] = f->l.in[i];
		f->in[i].data = malloc(tensor_bytes(&f->in[i]) + 1);
		if (!f->in[i].data)
			return error("out of memory for the benchmark's inputs");
		if (f->gen[i].kind != AK_GEN_NORMAL ||
		    (f->in[i].dtype != AK_F16 && f->in[i].dtype != AK_BF16))
			continue;
		f->table[i] = malloc((2 * AK_GEN_Z + 1) * sizeof(uint16_t));
		if (!f->table[i])
			return error("out of memory for the benchmark's inputs");
		ak_gen_table(f->table[i], f->in[i].dtype, &f->gen[i]);
	}
	rng_seed(&f->pick, secret_seed());
	f->t0 = now_ns();
	return 0;
}

static void fresh_release(struct fresh *f)
{
	for (int i = 0; i < AK_OP_MAX_IN; i++) {
		free(f->in[i].data);
		free(f->table[i]);
	}
	free(f->t[0]);
	free(f->t[1]);
	strbuf_release(&f->why);
}

static json_t *gen_json(const struct ak_gen *g)
{
	if (g->kind == AK_GEN_INDEX)
		return json_pack("{s:s,s:I}", "kind", "index", "n",
				 (json_int_t)g->n);
	return json_pack("{s:s,s:f,s:f}", "kind", "normal", "mean",
			 (double)g->mean, "sd", (double)g->sd);
}

/* Distinct rows, chosen now that the call is over. */
static void pick_rows(struct fresh *f)
{
	for (int64_t i = 0; i < f->nrows; i++) {
		int64_t r;
		int again;

		if (f->nrows == f->rows) {
			f->row[i] = i;
			continue;
		}
		do {
			r = (int64_t)(rng_uniform(&f->pick) * (double)f->rows);
			again = r >= f->rows;
			for (int64_t j = 0; j < i && !again; j++)
				again = f->row[j] == r;
		} while (again);
		f->row[i] = r;
	}
}

static json_t *spans_for_call(struct fresh *f)
{
	json_t *spans = json_array();
	int n_in = f->p->op->n_in;

	pick_rows(f);
	for (int64_t i = 0; i < f->nrows; i++)
		json_array_append_new(spans, json_pack("[i,I,I]", n_in,
			(json_int_t)(f->row[i] * f->len), (json_int_t)f->len));
	for (int t = 0; t < n_in; t++) {
		int64_t n = ak_numel(&f->in[t]), len = spot_len(&f->in[t]);

		f->spot_n[t] = len;
		for (int k = 0; k < SPOTS; k++) {
			f->spot[t][k] = (int64_t)(rng_uniform(&f->pick) *
						  (double)(n - len + 1));
			if (f->spot[t][k] > n - len)
				f->spot[t][k] = n - len;
			json_array_append_new(spans, json_pack("[i,I,I]", t,
				(json_int_t)f->spot[t][k], (json_int_t)len));
		}
	}
	return spans;
}

/* Elements [lo, lo + n) of input t under seed, into the host copy. */
static void regen(struct fresh *f, int t, int64_t lo, int64_t n,
		  uint64_t seed)
{
	const uint16_t *table = f->table[t];

	if (table) {            /* the same bits, 3x as fast */
		uint16_t *d = f->in[t].data;

		#pragma omp parallel for schedule(static) if (n > 65536)
		for (int64_t i = lo; i < lo + n; i++)
			d[i] = table[ak_gen_z(ak_mix(seed, t, (uint64_t)i)) +
				     AK_GEN_Z];
		return;
	}
	#pragma omp parallel for schedule(static) if (n > 65536)
	for (int64_t i = lo; i < lo + n; i++)
		ak_gen_store(f->in[t].data, f->in[t].dtype, (uint64_t)i, seed,
			     t, &f->gen[t]);
}

/* What the checked rows read, regenerated: a whole input once. */
static void regen_deps(struct fresh *f, uint64_t seed)
{
	int done[AK_OP_MAX_IN] = { 0 };

	for (int64_t i = 0; i < f->nrows; i++) {
		int64_t lo[AK_OP_MAX_IN], n[AK_OP_MAX_IN];

		op_row_deps(f->p->op, f->s, f->row[i], f->in, lo, n);
		for (int t = 0; t < f->p->op->n_in; t++) {
			int whole = lo[t] == 0 && n[t] == ak_numel(&f->in[t]);

			if (done[t])
				continue;
			regen(f, t, lo[t], n[t], seed);
			done[t] = whole;
		}
	}
}

/* The copied spots of the inputs against the generator: a kernel that
 * writes into its inputs is caught here. */
static int check_spots(struct fresh *f, const unsigned char *area,
		       uint64_t seed)
{
	const struct op *op = f->p->op;
	size_t off = (size_t)(f->nrows * f->len) * dtype_size(f->l.out[0].dtype);

	for (int t = 0; t < op->n_in; t++) {
		size_t es = dtype_size(f->in[t].dtype);

		for (int k = 0; k < SPOTS; k++) {
			int64_t e0 = f->spot[t][k], n = f->spot_n[t];

			regen(f, t, e0, n, seed);
			for (int64_t e = 0; e < n; e++)
				if (memcmp(area + off + (size_t)e * es,
					   (unsigned char *)f->in[t].data +
					   (size_t)(e0 + e) * es, es)) {
					strbuf_addf(&f->why, "modified input "
						    "%d (%s) at element %lld",
						    t, op->in_names[t],
						    (long long)(e0 + e));
					return 1;
				}
			off += (size_t)n * es;
		}
	}
	return 0;
}

/* The checked rows of call k against the fp64 reference of its data. */
static int check_rows(struct fresh *f, const unsigned char *area,
		      json_t *cj)
{
	const struct op *op = f->p->op;
	struct ak_tensor out = f->l.out[0];
	struct refs rf = { .n = f->nrows, .len = f->len, .packed = 1 };
	int fail;

	rf.rows = f->row;
	rf.ref = xmalloc(sizeof(double) * (size_t)(f->nrows * f->len + 1));
	rf.scale = xmalloc(sizeof(double) * (size_t)(f->nrows + 1));
	#pragma omp parallel for schedule(dynamic, 1) if (f->nrows > 1)
	for (int64_t i = 0; i < f->nrows; i++) {
		op->reference(f->s, f->in, f->scalar, f->row[i],
			      rf.ref + i * f->len);
		rf.scale[i] = op_row_scale(op, f->s, f->in, f->scalar,
					   f->row[i]);
	}
	out.data = (void *)area;
	fail = refs_compare(f->p, f->s, f->dt, &out, &rf, cj, &f->why);
	free(rf.ref);
	free(rf.scale);
	return fail;
}

/* Call k's outputs and input spots, copied into the check area. */
static int check_call(struct fresh *f, long long k, int slot, uint64_t seed)
{
	const unsigned char *area = f->base + f->check_off +
		(size_t)(k & 1) * f->check_bytes;
	json_t *cj = json_object();
	long long t0 = now_ns();
	int fail;

	strbuf_reset(&f->why);
	regen_deps(f, seed);
	fail = check_rows(f, area, cj) || check_spots(f, area, seed);
	json_decref(cj);
	f->check_ns += now_ns() - t0;
	if (fail) {
		struct strbuf head = STRBUF_INIT;

		strbuf_addf(&head, "timed call %lld (kernel %d): ", k, slot);
		strbuf_insert_front(&f->why, head.buf);
		strbuf_release(&head);
		f->failed = 1;
	}
	return fail;
}

/* One timing of the candidate (slot[0]) or the best (slot[1]). */
static void record(struct fresh *f, int slot, double us)
{
	for (int i = 0; i < 2; i++)
		if (f->slot[i] == slot) {
			ALLOC_GROW(f->t[i], f->nt[i] + 1, f->alloc[i]);
			f->t[i][f->nt[i]++] = us;
		}
}

static void quartiles(const double *v, size_t n, double *q1, double *q3)
{
	double *s = xmalloc(sizeof(double) * (n ? n : 1));

	memcpy(s, v, sizeof(double) * n);
	qsort(s, n, sizeof(double), cmp_double);
	*q1 = quantile(s, n, 0.25);
	*q3 = quantile(s, n, 0.75);
	free(s);
}

/*
 * A sequential test on the timings so far: once each kernel has its
 * minimum of calls, the benchmark of this shape ends when the middle
 * halves of the candidate's and the best's timings are apart by more than
 * the gain that decides (faster), or apart the other way (slower).  The
 * keep rule would decide the same on more calls; an undecided pair runs
 * to its budget.
 */
static int settled(struct fresh *f)
{
	double a1, a3, b1, b3;

	if (!f->settle || f->n_slots < 2 ||
	    f->nt[0] < BENCH_WARMUP + BENCH_MIN_ITERS ||
	    f->nt[1] < BENCH_WARMUP + BENCH_MIN_ITERS)
		return 0;
	quartiles(f->t[0] + BENCH_WARMUP, f->nt[0] - BENCH_WARMUP, &a1, &a3);
	quartiles(f->t[1] + BENCH_WARMUP, f->nt[1] - BENCH_WARMUP, &b1, &b3);
	return a3 < b1 * (1 - f->settle->gain) ||
		a1 > b3 * (1 + f->settle->slack);
}

/* The parent's side of the conversation: every call checked, until the
 * runner's last line (returned).  NULL when the runner died (why). */
static json_t *converse(struct fresh *f, struct runner *r, json_t *first,
			int timeout_ms, double budget_ms, int min_calls,
			struct strbuf *why)
{
	json_t *msg = first;

	while (msg && json_object_get(msg, "call")) {
		long long k = json_integer_value(json_object_get(msg, "call"));
		int slot = (int)json_integer_value(json_object_get(msg, "slot"));
		uint64_t seed = (uint64_t)json_integer_value(
			json_object_get(msg, "seed"));
		/* the wall clock bounds what checking costs: past twice the
		 * budget, stop once every kernel has its minimum */
		int stop;

		record(f, slot, json_number_value(json_object_get(msg, "us")));
		if (!f->settled && settled(f)) {
			f->settled = 1;
			trace("bench", "settled after %lld calls", k + 1);
		}
		stop = f->failed || f->settled || (k + 1 >= min_calls &&
			(now_ns() - f->t0) / 1e6 > 2 * budget_ms + 1000);
		json_t *ans = json_pack("{s:o,s:b}", "spans", spans_for_call(f),
					"stop", stop);

		json_decref(msg);
		f->calls++;
		if (runner_reply(r, ans, why) < 0 ||
		    !(msg = runner_next(r, timeout_ms, why))) {
			json_decref(ans);
			return NULL;
		}
		json_decref(ans);
		if (!json_object_get(msg, "copied"))
			return msg;     /* the copy failed: the last line */
		json_decref(msg);
		if (!f->failed)
			check_call(f, k, slot, seed);
		if (f->lockstep) {
			ans = json_pack("{s:b,s:b}", "next", 1, "stop",
					f->failed || stop);
			if (runner_reply(r, ans, why) < 0) {
				json_decref(ans);
				return NULL;
			}
			json_decref(ans);
		}
		msg = runner_next(r, timeout_ms, why);
	}
	return msg;
}

/* The timings of a finished benchmark into result; 0, or 1 (verdict). */
static int bench_times(const struct problem *p, const struct fresh *f,
		       json_t *res, const int *slots, int n, json_t *ceilings,
		       json_t **result, struct strbuf *verdict)
{
	json_t *times = json_object_get(res, "times"), *kernels = json_array();
	json_t *copy = stats(json_object_get(times, "copy"));
	double copy_med = json_number_value(json_object_get(copy, "median_us"));
	const char *kind;
	double fl = floor_us(p, f->s, f->dt, copy_med, ceilings, &kind), lim;
	char shape[128];
	int ret = 0;

	for (int i = 0; i < n; i++) {
		char key[16];
		json_t *st, *by, *t, *sets, *positions;

		snprintf(key, sizeof(key), "%d", slots[i]);
		t = json_object_get(times, key);
		sets = json_object_get(json_object_get(res, "sets"), key);
		positions = json_object_get(json_object_get(res, "positions"),
					    key);
		st = stats_strata(t, sets, positions, n);
		json_object_set_new(st, "roofline", json_real(fl /
			json_number_value(json_object_get(st, "median_us"))));
		if ((by = medians_by(t, sets, n)))
			json_object_set_new(st, "median_by_set_us", by);
		if ((by = medians_by(t, positions, n)))
			json_object_set_new(st, "median_by_position_us", by);
		json_array_append_new(kernels, st);
	}
	shape_format(f->s, shape, sizeof(shape));
	*result = json_pack("{s:s,s:s,s:o,s:o,s:f,s:s,s:f,s:f}", "shape",
			    shape, "dtype", dtype_name(f->dt), "kernels",
			    kernels, "copy", copy, "floor_us", fl, "floor_kind",
			    kind, "bytes", p->op->bytes(f->s, f->dt), "flops",
			    p->op->flops(f->s));
	json_object_set_new(*result, "checked", json_pack("{s:I,s:I,s:f,s:b}",
		"calls", (json_int_t)f->calls, "rows_per_call",
		(json_int_t)f->nrows, "check_s", f->check_ns / 1e9, "settled",
		f->settled));
	lim = impossible_under(p, f->s, f->dt, fl, kind, json_number_value(
			json_object_get(copy, "min_us")), ceilings);
	for (int i = 0; !ret && i < n; i++) {
		double med = json_number_value(json_object_get(
			json_array_get(kernels, i), "median_us"));

		/* The host's floor is one core's copy (dev-host.c), which a
		 * parallel kernel may beat: the check is for GPU timings. */
		if (med < lim && strcmp(p->backend, "host")) {
			strbuf_addf(verdict, "kernel %d: %.2f us is under %.2f us, "
				    "faster than the device can move its bytes "
				    "or do its flops (floor %.2f us): impossible, "
				    "so the timing cannot be trusted", i, med, lim,
				    fl);
			ret = 1;
		}
	}
	return ret;
}

static json_t *bench_request(struct runner *r, struct fresh *f,
			     const int *slots, int n, double budget,
			     double scale, uint64_t seed)
{
	const struct problem *p = f->p;
	json_t *req = layout_request(r, p, &f->l, f->s, "bench");
	json_t *js = json_array(), *gen = json_array();
	int iters = (int)(BENCH_ITERS * scale + 0.5);

	if (iters < BENCH_MIN_ITERS)
		iters = BENCH_MIN_ITERS;
	/* whole cycles of the runner's turns (n * n rounds) */
	iters = (iters + n * n - 1) / (n * n) * (n * n);

	for (int i = 0; i < n; i++)
		json_array_append_new(js, json_integer(slots[i]));
	for (int i = 0; i < p->op->n_in; i++)
		json_array_append_new(gen, gen_json(&f->gen[i]));
	json_object_set_new(req, "slots", js);
	json_object_set_new(req, "gen", gen);
	json_object_set_new(req, "seed", json_integer((json_int_t)seed));
	json_object_set_new(req, "warmup", json_integer(BENCH_WARMUP));
	json_object_set_new(req, "iters", json_integer(iters));
	json_object_set_new(req, "min_iters", json_integer(BENCH_MIN_ITERS));
	json_object_set_new(req, "budget_ms", json_real(budget));
	json_object_set_new(req, "copy_bytes",
		json_integer((json_int_t)p->op->bytes(f->s, f->dt)));
	json_object_set_new(req, "check_offset",
			    json_integer((json_int_t)f->check_off));
	json_object_set_new(req, "check_bytes",
			    json_integer((json_int_t)f->check_bytes));
	json_object_set_new(req, "lockstep", json_boolean(f->lockstep));
	return req;
}

/* The runner's last line: an error, a kernel's failure, or the times. */
static int bench_outcome(json_t *res, struct strbuf *verdict)
{
	if (!json_is_true(json_object_get(res, "ok"))) {
		strbuf_addf(verdict, "benchmark failed: %s",
			    json_string_value(json_object_get(res, "error")));
		return 1;
	}
	if (json_integer_value(json_object_get(res, "rc")) ||
	    json_string_value(json_object_get(res, "integrity"))) {
		strbuf_addf(verdict, "during timing, slot %lld: %s",
			    (long long)json_integer_value(json_object_get(res, "slot")),
			    json_string_value(json_object_get(res, "integrity")) ?
			    json_string_value(json_object_get(res, "integrity")) :
			    "ak_kernel() returned an error");
		return 1;
	}
	return 0;
}

int bench_fresh(struct runner *r, const struct problem *p,
		const struct shape *s, enum ak_dtype dt, const int *slots,
		int n, json_t *ceilings, double scale,
		const struct settle *settle, json_t **result,
		struct strbuf *verdict)
{
	struct fresh f;
	json_t *req = NULL, *res = NULL;
	double budget = 1500;
	const char *env = getenv("AUTOKERNEL_BENCH_MS");
	uint64_t seed = secret_seed();
	int ret = 1, timeout;

	*result = NULL;
	if (env && atof(env) > 0)
		budget = atof(env);
	budget *= scale;
	if (fresh_init(&f, r, p, s, dt, n) < 0)
		goto cleanup;
	f.settle = settle;
	f.slot[0] = slots[0];
	f.slot[1] = n > 1 ? slots[1] : -1;
	req = bench_request(r, &f, slots, n, budget, scale, seed);
	timeout = r->timeout_ms * (n + 1) + (int)(4 * budget);
	res = runner_request(r, req, timeout, verdict);
	res = converse(&f, r, res, timeout, budget,
		       n * (BENCH_WARMUP + BENCH_MIN_ITERS), verdict);
	trace("bench", "%lld calls checked in %.2f ms of %.2f ms", f.calls,
	      f.check_ns / 1e6, ms_since(f.t0));
	if (!res)
		goto cleanup;
	if (f.failed) {
		strbuf_addf(verdict, "wrong output of a %s", f.why.buf);
		goto cleanup;
	}
	if (bench_outcome(res, verdict))
		goto cleanup;
	ret = bench_times(p, &f, res, slots, n, ceilings, result, verdict);
	json_object_set_new(*result, "seed", json_integer((json_int_t)seed));
cleanup:
	json_decref(req);
	json_decref(res);
	fresh_release(&f);
	return ret;
}


/* The standard error of a median from the interquartile range. */
static double median_se(json_t *k)
{
	double iqr = json_number_value(json_object_get(k, "q3_us")) -
		json_number_value(json_object_get(k, "q1_us"));
	double n = (double)json_integer_value(json_object_get(k, "n"));

	return 0.93 * iqr / sqrt(n > 1 ? n : 1);
}

/*
 * The keep rule on two times ta (the candidate) and tb (the best) with the
 * noise of their difference: faster beyond the noise, or with the middle
 * halves of the timings apart, and by at least min_gain.
 */
static int keep_rule(double ta, double tb, double noise, int apart,
		     double min_gain, struct strbuf *why)
{
	double gain = (tb - ta) / tb;

	if (ta <= 0 || tb <= 0) {
		strbuf_addstr(why, "no timing");
		return 0;
	}
	if (ta - tb > noise) {
		strbuf_addf(why, "slower: %.2f us vs %.2f us (%+.1f%%, noise "
			    "%.2f us)", ta, tb, -gain * 100, noise);
		return 0;
	}
	if (tb - ta <= noise && !apart) {
		strbuf_addf(why, "not faster: %.2f us vs %.2f us (%+.1f%%), "
			    "within the noise (%.2f us)", ta, tb, -gain * 100,
			    noise);
		return 0;
	}
	if (gain < min_gain) {
		strbuf_addf(why, "gain %.2f%% is under autokernel.minGain "
			    "(%.2f%%): %.2f us vs %.2f us", gain * 100,
			    min_gain * 100, ta, tb);
		return 0;
	}
	strbuf_addf(why, "faster: %.2f us vs %.2f us (%.1f%% gain, noise "
		    "%.2f us%s)", ta, tb, gain * 100, noise, tb - ta <= noise ?
		    "; the middle halves of the timings do not overlap" : "");
	return 1;
}

/* The middle halves of the two samples apart: beyond the noise whatever
 * the standard errors say, which a loaded machine's preempted calls
 * inflate (an 18x faster host kernel was once "within the noise" of a
 * best whose IQR spanned milliseconds). */
static int halves_apart(json_t *a, json_t *b)
{
	return num(a, "q3_us") < num(b, "q1_us");
}

static double pair_noise(json_t *a, json_t *b)
{
	return 2 * sqrt(median_se(a) * median_se(a) +
			median_se(b) * median_se(b));
}

int bench_keep(json_t *bench, double min_gain, struct strbuf *why)
{
	json_t *ks = json_object_get(bench, "kernels");
	json_t *a = json_array_get(ks, 0), *b = json_array_get(ks, 1);

	return keep_rule(num(a, "median_us"), num(b, "median_us"),
			 pair_noise(a, b), halves_apart(a, b), min_gain, why);
}

/* A shape where the candidate is slower than the best beyond that
 * shape's own noise (or with the middle halves of the timings apart, as
 * the keep rule counts a gain: preempted calls on a loaded machine can
 * spread the quartiles over more than a 3x regression) and by more than
 * max_regress; NULL if none. */
static json_t *regressed(json_t *shapes, double max_regress, double *by)
{
	size_t i;
	json_t *sh;

	json_array_foreach(shapes, i, sh) {
		json_t *ks = json_object_get(sh, "kernels");
		json_t *a = json_array_get(ks, 0), *b = json_array_get(ks, 1);
		double ta = num(a, "median_us"), tb = num(b, "median_us");

		if ((ta - tb > pair_noise(a, b) || halves_apart(b, a)) &&
		    tb > 0 && (ta - tb) / tb > max_regress) {
			*by = (ta - tb) / tb;
			return sh;
		}
	}
	return NULL;
}

int workload_keep(json_t *wl, double min_gain, double max_regress,
		  struct strbuf *why)
{
	json_t *shapes = json_object_get(wl, "shapes"), *sh;
	json_t *tot = json_object_get(wl, "total");
	double ta = num(tot, "candidate_us"), tb = num(tot, "best_us"), by = 0;
	int keep;

	if (json_array_size(shapes) == 1)
		return bench_keep(json_array_get(shapes, 0), min_gain, why);
	keep = keep_rule(ta, tb, num(tot, "noise_us"),
			 json_is_true(json_object_get(tot, "apart")),
			 min_gain, why);
	if (keep && (sh = regressed(shapes, max_regress, &by))) {
		strbuf_reset(why);
		strbuf_addf(why, "slower at %s (%+.0f%%), though %.0f%% faster "
			    "overall: %.2f us vs %.2f us", json_string_value(
			    json_object_get(sh, "shape")), by * 100,
			    (tb - ta) / tb * 100, ta, tb);
		return 0;
	}
	return keep;
}

/* The weighted totals of a workload's benchmarks, slots 0 and 1. */
static json_t *workload_total(json_t *shapes, int n)
{
	double t[3] = { 0 }, var = 0, fl = 0;
	int apart = 1;
	size_t i;
	json_t *sh;

	json_array_foreach(shapes, i, sh) {
		json_t *ks = json_object_get(sh, "kernels");
		double w = num(sh, "weight");

		for (int k = 0; k < n && k < 3; k++)
			t[k] += w * num(json_array_get(ks, k), "median_us");
		fl += w * num(sh, "floor_us");
		if (n > 1) {
			double nz = pair_noise(json_array_get(ks, 0),
					       json_array_get(ks, 1)) / 2;

			var += w * w * nz * nz;
			apart &= halves_apart(json_array_get(ks, 0),
					      json_array_get(ks, 1));
		}
	}
	return json_pack("{s:f,s:f,s:f,s:f,s:f,s:b}", "candidate_us", t[0],
			 "best_us", t[1], "baseline_us", t[2], "floor_us", fl,
			 "noise_us", 2 * sqrt(var), "apart", n > 1 && apart);
}

int bench_workload(struct runner *r, const struct problem *p,
		   const int *slots, int n, json_t *ceilings, double scale,
		   const struct settle *settle, json_t **result,
		   struct strbuf *verdict)
{
	json_t *shapes = json_array();
	int ret = 0;

	*result = NULL;
	for (int i = 0; i < p->n_work && !ret; i++) {
		const struct work *w = &p->work[i];
		json_t *b = NULL;

		/* the time budget and the rounds shared among the shapes */
		ret = bench_fresh(r, p, &w->s, w->dt, slots, n, ceilings,
				  scale / p->n_work, settle, &b, verdict);
		if (b) {
			json_object_set_new(b, "weight", json_real(w->weight));
			json_array_append_new(shapes, b);
		}
		if (ret && p->n_work > 1) {
			char sh[128];

			shape_format(&w->s, sh, sizeof(sh));
			strbuf_insert_front(verdict, ": ");
			strbuf_insert_front(verdict, sh);
			strbuf_insert_front(verdict, "at ");
		}
	}
	*result = json_pack("{s:o,s:o}", "total", workload_total(shapes, n),
			    "shapes", shapes);
	return ret;
}
