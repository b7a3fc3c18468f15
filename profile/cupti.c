/*
 * cupti.c: the JSON lines libak-cupti.so writes (one object a
 * line, profile/cupti-inject.c) into a profile.  Kernels are mapped by
 * name alone: there are no CPU ops to say more, and no shapes.  One
 * sequence is read too: a log-softmax kernel followed by an nll_loss one
 * is one cross-entropy call (alone it is no op: not the softmax op).
 *
 *	{"kind":"device","id":0,"name":"NVIDIA H200"}
 *	{"kind":"kernel","name":"softmax_kernel(float const*, ...)",
 *	 "device":0,"stream":7,"grid":[4096,1,1],"block":[256,1,1],
 *	 "start":1712,"end":9920,"corr":31}            (times in ns)
 *	{"kind":"dropped","n":12}
 *	{"kind":"error","message":"..."}
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "profile/profile.h"
#include "lib/strbuf.h"

/* A kernel name's mapping, worked out once per name. */
struct kname {
	char *name;
	char *what;
	int opi, dt_known, log_softmax;
	enum ak_dtype dt;
};

struct kcache {
	struct kname *k;
	size_t nr, alloc, nr_slots;
	uint32_t *slots;
};

static uint32_t hash(const char *s)
{
	uint32_t h = 2166136261u;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

static void kcache_grow(struct kcache *c)
{
	free(c->slots);
	c->nr_slots = c->nr_slots ? 2 * c->nr_slots : 256;
	c->slots = xcalloc(c->nr_slots, sizeof(*c->slots));
	for (size_t i = 0; i < c->nr; i++) {
		size_t h = hash(c->k[i].name) & (c->nr_slots - 1);

		while (c->slots[h])
			h = (h + 1) & (c->nr_slots - 1);
		c->slots[h] = (uint32_t)i + 1;
	}
}

static const struct kname *kcache_get(struct kcache *c, const char *name)
{
	struct kname *k;
	char what[128];
	size_t h;

	if (2 * (c->nr + 1) > c->nr_slots)
		kcache_grow(c);
	h = hash(name) & (c->nr_slots - 1);
	while (c->slots[h]) {
		k = &c->k[c->slots[h] - 1];
		if (!strcmp(k->name, name))
			return k;
		h = (h + 1) & (c->nr_slots - 1);
	}
	ALLOC_GROW(c->k, c->nr + 1, c->alloc);
	k = &c->k[c->nr];
	k->name = xstrdup(name);
	k->dt = AK_F16;
	k->opi = prof_map_kernel(name, &k->dt, &k->dt_known);
	k->log_softmax = prof_is_log_softmax(name);
	prof_short_name(what, sizeof(what), name);
	k->what = xstrdup(what);
	c->slots[h] = (uint32_t)++c->nr;
	return k;
}

static void kcache_release(struct kcache *c)
{
	for (size_t i = 0; i < c->nr; i++) {
		free(c->k[i].name);
		free(c->k[i].what);
	}
	free(c->k);
	free(c->slots);
}

/* A log-softmax kernel waiting for the kernel after it. */
struct held {
	const struct kname *k;
	double us;
};

static void add_kname(struct profile *p, const struct kname *k, int opi,
		      double us, int new_call)
{
	profile_add(p, opi, NULL, k->dt_known ? &k->dt : NULL, us, new_call,
		    k->what);
}

/* The held log-softmax: cross_entropy's if an nll_loss k follows it. */
static int release(struct profile *p, struct held *h, const struct kname *k)
{
	int ce = prof_op_index("cross_entropy");
	int joined = h->k && k && k->opi == ce;

	if (h->k)
		add_kname(p, h->k, joined ? ce : -1, h->us, 1);
	h->k = NULL;
	return joined;
}

static void one_kernel(struct profile *p, struct kcache *c, struct held *h,
		       const char *name, double us)
{
	const struct kname *k = kcache_get(c, name);
	int joined = release(p, h, k);

	if (k->log_softmax) {
		h->k = k;
		h->us = us;
		return;
	}
	add_kname(p, k, k->opi, us, !joined);
}

static void one_line(struct profile *p, struct kcache *c, struct held *h,
		     json_t *j)
{
	const char *kind = json_string_value(json_object_get(j, "kind"));
	const char *name = json_string_value(json_object_get(j, "name"));
	double start, end;

	if (!kind)
		return;
	if (!strcmp(kind, "kernel") && name) {
		start = json_number_value(json_object_get(j, "start"));
		end = json_number_value(json_object_get(j, "end"));
		if (end >= start)
			one_kernel(p, c, h, name, (end - start) / 1000.0);
	} else if (!strcmp(kind, "device") && name && !p->device) {
		p->device = xstrdup(name);
	} else if (!strcmp(kind, "dropped")) {
		p->dropped += (long)json_integer_value(json_object_get(j, "n"));
	} else if (!strcmp(kind, "error")) {
		warning("the CUPTI injection library: %s",
			json_string_value(json_object_get(j, "message")));
	}
}

int profile_read_cupti(struct profile *p, const char *path)
{
	FILE *f = fopen(path, "r");
	struct kcache c = { 0 };
	struct held h = { NULL, 0 };
	char *line = NULL;
	size_t cap = 0;
	long lineno = 0, bad = 0, first_bad = 0;

	if (!f)
		return error_errno("unable to open '%s'", path);
	while (getline(&line, &cap, f) > 0) {
		json_t *j = json_loads(line, 0, NULL);

		lineno++;
		if (!j) {
			/* a process killed mid-write leaves half a line */
			if (!bad++)
				first_bad = lineno;
			continue;
		}
		one_line(p, &c, &h, j);
		json_decref(j);
	}
	release(p, &h, NULL);
	if (bad)
		warning("%ld malformed kernel record%s skipped (the first: line "
			"%ld; a process killed while writing?)", bad,
			bad > 1 ? "s" : "", first_bad);
	if (p->dropped)
		warning("CUPTI dropped %ld kernel record%s: the times are low",
			p->dropped, p->dropped > 1 ? "s" : "");
	free(line);
	fclose(f);
	kcache_release(&c);
	return 0;
}
