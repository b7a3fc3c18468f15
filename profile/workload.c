/*
 * workload.c: an op's workload from a profile (profile/profile.h): the
 * shapes its calls ran at, each weighted by its share of the op's time.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "profile/profile.h"

/* How far apart two shapes are: the sum of |log| of their ratios. */
static double distance(const struct shape *a, const struct shape *b)
{
	double d = 0;

	for (int i = 0; i < a->n && i < b->n; i++)
		d += fabs(log((double)a->d[i] / (double)b->d[i]));
	return d;
}

struct piece {
	const struct prof_shape *ps;
	double us;
	int alive;
};

/* The smallest piece's time joins its nearest neighbour; 0 if none. */
static int merge_smallest(struct piece *p, size_t n, double below)
{
	size_t small = n, near = n;
	double best = INFINITY;

	for (size_t i = 0; i < n; i++)
		if (p[i].alive && (small == n || p[i].us < p[small].us))
			small = i;
	if (small == n || p[small].us >= below)
		return 0;
	for (size_t i = 0; i < n; i++) {
		double d;

		if (i == small || !p[i].alive)
			continue;
		d = distance(&p[i].ps->s, &p[small].ps->s);
		if (d < best) {
			best = d;
			near = i;
		}
	}
	if (near == n)
		return 0;
	p[near].us += p[small].us;
	p[small].alive = 0;
	return 1;
}

static int by_time(const void *a, const void *b)
{
	const struct piece *x = a, *y = b;

	if (x->alive != y->alive)
		return y->alive - x->alive;
	return x->us < y->us ? 1 : x->us > y->us ? -1 : 0;
}

static size_t count_alive(const struct piece *p, size_t n)
{
	size_t live = 0;

	for (size_t i = 0; i < n; i++)
		live += p[i].alive;
	return live;
}

int profile_workload(const struct prof_op *o, struct strvec *specs)
{
	struct piece *p = xcalloc(o->nr_shapes + 1, sizeof(*p));
	double total = 0;
	size_t alive = 0;
	int n = 0;

	for (size_t i = 0; i < o->nr_shapes; i++) {
		if (!o->shapes[i].s.n || o->shapes[i].us <= 0)
			continue;
		p[alive++] = (struct piece){ &o->shapes[i], o->shapes[i].us, 1 };
		total += o->shapes[i].us;
	}
	/* under 1% of the op's time is merged, and never more shapes than
	 * a problem holds */
	while (merge_smallest(p, alive, 0.01 * total))
		;
	for (size_t live = count_alive(p, alive); live > AK_OP_MAX_SHAPES &&
	     merge_smallest(p, alive, INFINITY); live--)
		;
	/* the heaviest first: it is the bench shape */
	qsort(p, alive, sizeof(*p), by_time);
	for (size_t i = 0; i < alive; i++) {
		char shape[96];

		if (!p[i].alive)
			continue;
		shape_format(&p[i].ps->s, shape, sizeof(shape));
		if (p[i].ps->dt_known)
			strvec_pushf(specs, "%s:%.4f:%s", shape, p[i].us / total,
				     dtype_name(p[i].ps->dt));
		else
			strvec_pushf(specs, "%s:%.4f", shape, p[i].us / total);
		n++;
	}
	free(p);
	return n;
}
