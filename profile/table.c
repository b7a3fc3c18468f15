/*
 * table.c: a profile's sums, the device's ceilings, each op's
 * floor and Amdahl bound, and the ranking.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/paths.h"
#include "profile/profile.h"
#include "lib/repo.h"

/*
 * Without a measured device: an H200's rough ceilings.  A copy of tens of
 * megabytes moves about 3000 GB/s (a 2 GiB copy reaches 4270, small ones
 * less); dense f16/bf16 matmuls run near 700 TFLOP/s, f32 without TF32
 * near 60.  `git autokernel init` on the device measures the real ones.
 */
#define DEFAULT_COPY_GBPS 3000.0
#define DEFAULT_TFLOPS_F16 700.0
#define DEFAULT_TFLOPS_F32 60.0

void profile_init(struct profile *p)
{
	memset(p, 0, sizeof(*p));
	for (int i = 0; ops[i] && i < PROF_MAX_OPS; i++) {
		p->op[i].op = ops[i];
		p->nr_ops = i + 1;
	}
}

static void prof_op_release(struct prof_op *o)
{
	free(o->shapes);
	o->shapes = NULL;
	o->nr_shapes = o->alloc_shapes = 0;
}

void profile_release(struct profile *p)
{
	for (int i = 0; i < p->nr_ops; i++)
		prof_op_release(&p->op[i]);
	prof_op_release(&p->other);
	for (size_t i = 0; i < p->nr_names; i++)
		free(p->names[i].name);
	free(p->names);
	free(p->name_slots);
	free(p->top_names);
	free(p->device);
	memset(p, 0, sizeof(*p));
}

static uint32_t hash_name(const char *s)
{
	uint32_t h = 2166136261u;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

static void rehash(struct profile *p)
{
	free(p->name_slots);
	p->nr_slots = p->nr_slots ? p->nr_slots * 2 : 256;
	p->name_slots = xcalloc(p->nr_slots, sizeof(uint32_t));
	for (size_t i = 0; i < p->nr_names; i++) {
		size_t h = hash_name(p->names[i].name) & (p->nr_slots - 1);

		while (p->name_slots[h])
			h = (h + 1) & (p->nr_slots - 1);
		p->name_slots[h] = (uint32_t)i + 1;
	}
}

static struct prof_name *name_get(struct profile *p, const char *name)
{
	size_t h;

	if (2 * (p->nr_names + 1) > p->nr_slots)
		rehash(p);
	h = hash_name(name) & (p->nr_slots - 1);
	while (p->name_slots[h]) {
		struct prof_name *n = &p->names[p->name_slots[h] - 1];

		if (!strcmp(n->name, name))
			return n;
		h = (h + 1) & (p->nr_slots - 1);
	}
	ALLOC_GROW(p->names, p->nr_names + 1, p->alloc_names);
	p->names[p->nr_names].name = xstrdup(name);
	p->names[p->nr_names].us = 0;
	p->names[p->nr_names].kernels = 0;
	p->name_slots[h] = (uint32_t)++p->nr_names;
	return &p->names[p->nr_names - 1];
}

static int same_shape(const struct prof_shape *g, const struct prof_shape *at)
{
	if (g->s.n != at->s.n || g->dt_known != at->dt_known ||
	    (at->dt_known && g->dt != at->dt) || g->layout != at->layout)
		return 0;
	for (int i = 0; i < g->s.n; i++)
		if (g->s.d[i] != at->s.d[i])
			return 0;
	return 1;
}

static struct prof_shape *shape_get(struct prof_op *o,
				    const struct prof_shape *at)
{
	struct prof_shape *g;

	for (size_t i = 0; i < o->nr_shapes; i++)
		if (same_shape(&o->shapes[i], at))
			return &o->shapes[i];
	ALLOC_GROW(o->shapes, o->nr_shapes + 1, o->alloc_shapes);
	g = &o->shapes[o->nr_shapes++];
	*g = *at;
	g->us = 0;
	g->calls = 0;
	return g;
}

void profile_add_at(struct profile *p, int opi, const struct prof_shape *at,
		    double us, int new_call, const char *what)
{
	struct prof_op *o = opi >= 0 && opi < p->nr_ops ? &p->op[opi] :
			    &p->other;
	struct prof_shape *g;

	p->total_us += us;
	p->kernels++;
	o->us += us;
	o->kernels++;
	o->calls += !!new_call;
	if (o == &p->other) {
		struct prof_name *n = name_get(p, what ? what : "?");

		n->us += us;
		n->kernels++;
		return;
	}
	g = shape_get(o, at);
	g->us += us;
	g->calls += !!new_call;
}

void profile_add(struct profile *p, int opi, const struct shape *s,
		 const enum ak_dtype *dt, double us, int new_call,
		 const char *what)
{
	struct prof_shape at;

	memset(&at, 0, sizeof(at));
	at.layout = -1;
	if (s && s->n)
		at.s = *s;
	if (dt) {
		at.dt = *dt;
		at.dt_known = 1;
	}
	profile_add_at(p, opi, &at, us, new_call, what);
}

static void device_file(struct strbuf *path, const char *dir,
			const char *backend, const char *device)
{
	strbuf_reset(path);
	strbuf_addf(path, "%s/device-%s-", dir, backend);
	for (; *device; device++)
		strbuf_addch(path, isalnum((unsigned char)*device) ?
			     tolower((unsigned char)*device) : '-');
	strbuf_addstr(path, ".json");
}

static int load_ceilings(struct prof_ceilings *c, const char *path)
{
	json_t *j = json_load_file(path, 0, NULL), *m;
	double copy = json_number_value(json_object_get(j, "copy_gbps"));
	static const char *const dts[] = { "f16", "bf16", "f32" };

	if (!j || copy <= 0) {
		json_decref(j);
		return -1;
	}
	c->copy_gbps = copy;
	m = json_object_get(j, "matrix_tflops");
	for (int i = 0; i < 3; i++) {
		double r = json_number_value(json_object_get(m, dts[i]));

		if (r > 0) {
			c->tflops[i] = r;
			c->measured_matrix = 1;
		}
	}
	c->measured = 1;
	snprintf(c->origin, sizeof(c->origin), "%s", path);
	json_decref(j);
	return 0;
}

void prof_ceilings_find(struct prof_ceilings *c, const char *device,
			const char *backend)
{
	struct strbuf path = STRBUF_INIT, dir = STRBUF_INIT;

	memset(c, 0, sizeof(*c));
	c->copy_gbps = DEFAULT_COPY_GBPS;
	c->tflops[AK_F16] = c->tflops[AK_BF16] = DEFAULT_TFLOPS_F16;
	c->tflops[AK_F32] = DEFAULT_TFLOPS_F32;
	if (!device || !*device)
		return;
	/* where `init` keeps them: the repository, else the user's cache */
	if (repo_get() && !git_repository_is_bare(repo_get())) {
		strbuf_addf(&dir, "%sautokernel", repo_gitdir());
		device_file(&path, dir.buf, backend, device);
		load_ceilings(c, path.buf);
	}
	if (!c->measured) {
		device_file(&path, ak_cachedir(), backend, device);
		load_ceilings(c, path.buf);
	}
	strbuf_release(&path);
	strbuf_release(&dir);
}

double prof_floor_us(const struct op *op, const struct shape *s,
		     enum ak_dtype dt, const struct prof_ceilings *c)
{
	double copy = op->bytes(s, dt) / (c->copy_gbps * 1e3);
	double rate = c->tflops[dt <= AK_F32 ? dt : AK_F32];
	double math = rate > 0 ? op->flops(s) / (rate * 1e6) : 0;

	return copy > math ? copy : math;
}

/*
 * The floor of all of an op's calls: each at its own shape; calls of
 * unknown shape at the typical one.  Unknown (< 0) without any shape.
 */
static void op_floor(struct prof_op *o, const struct prof_ceilings *c)
{
	const struct prof_shape *t = NULL;
	double f = 0;

	for (size_t i = 0; i < o->nr_shapes; i++)
		if (o->shapes[i].s.n && (!t || o->shapes[i].us > t->us))
			t = &o->shapes[i];
	o->typical = t;
	if (!t) {
		o->floor_us = -1;
		return;
	}
	for (size_t i = 0; i < o->nr_shapes; i++) {
		const struct prof_shape *g = &o->shapes[i];
		const struct prof_shape *at = g->s.n ? g : t;
		enum ak_dtype dt = at->dt_known ? at->dt : AK_F16;

		f += (double)g->calls * prof_floor_us(o->op, &at->s, dt, c);
	}
	/* a floor above the measured time means the ceilings are off */
	o->floor_us = f < o->us ? f : o->us;
}

static int cmp_op(const void *a, const void *b)
{
	const struct prof_op *x = *(struct prof_op *const *)a;
	const struct prof_op *y = *(struct prof_op *const *)b;

	if (x->us != y->us)
		return x->us > y->us ? -1 : 1;
	return strcmp(x->op->name, y->op->name);
}

static int cmp_name(const void *a, const void *b)
{
	const struct prof_name *x = *(struct prof_name *const *)a;
	const struct prof_name *y = *(struct prof_name *const *)b;

	if (x->us != y->us)
		return x->us > y->us ? -1 : 1;
	return strcmp(x->name, y->name);
}

void profile_finish(struct profile *p, const struct prof_ceilings *c)
{
	double T = p->total_us;

	p->ceil = *c;
	p->nr_rank = 0;
	for (int i = 0; i < p->nr_ops; i++) {
		struct prof_op *o = &p->op[i];

		if (!o->kernels)
			continue;
		o->share = T > 0 ? o->us / T : 0;
		op_floor(o, c);
		o->limit = T > o->us ? T / (T - o->us) : 0;
		o->bound = o->floor_us >= 0 && T > 0 ?
			   T / (T - o->us + o->floor_us) : 0;
		p->rank[p->nr_rank++] = o;
	}
	qsort(p->rank, p->nr_rank, sizeof(p->rank[0]), cmp_op);
	p->other.share = T > 0 ? p->other.us / T : 0;
	free(p->top_names);
	p->top_names = xcalloc(p->nr_names + 1, sizeof(*p->top_names));
	for (size_t i = 0; i < p->nr_names; i++)
		p->top_names[i] = &p->names[i];
	qsort(p->top_names, p->nr_names, sizeof(*p->top_names), cmp_name);
}
