/*
 * trace.c: a PyTorch profiler chrome trace (torch.profiler's
 * export_chrome_trace, plain or gzip) into a profile.
 *
 * A kernel ("cat": "kernel") is linked to the CPU event that launched it,
 * by the first of these the trace has:
 *
 *   1. its args.correlation, equal to a cuda_runtime/cuda_driver event's
 *      (cudaLaunchKernel, cuLaunchKernel, cudaGraphLaunch ...);
 *   2. an "ac2g" flow: the "f" end lies in the kernel, the "s" end with
 *      the same id in the runtime event (newer traces, or kernels whose
 *      args were dropped);
 *   3. its args["External id"], equal to a cpu_op's.
 *
 * The CPU events of a thread nest (a cpu_op inside a Python function inside
 * a module's forward), so the events around the launch, innermost first,
 * are the chain.  What a kernel counts as, first that applies:
 *
 *   1. the run (profile/pattern.c) its outermost op belongs to: the
 *      sequence of ops says what the model's code computes;
 *   2. the outermost event of the chain that names an op
 *      (profile/map.c): an nn.Module: LlamaRMSNorm scope, aten::linear;
 *   3. its own name.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>
#include "profile/events.h"
#include "lib/strbuf.h"

/* nesting slack: timestamps are microseconds with ns digits in a double */
#define EPS_US 0.005
#define MAX_CHAIN 256
/* descendants looked at for a scope's shape or its SwiGLU */
#define MAX_SCAN 20000

static struct trace *sort_trace;

static int cmp_time(const void *a, const void *b)
{
	const struct ev *x = &sort_trace->ev[*(const int *)a];
	const struct ev *y = &sort_trace->ev[*(const int *)b];

	if (x->thread != y->thread)
		return x->thread < y->thread ? -1 : 1;
	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	if (x->end != y->end)           /* the longer one encloses */
		return x->end > y->end ? -1 : 1;
	return x->kind - y->kind;       /* ops before their launches */
}

static int cmp_key(const void *a, const void *b)
{
	const struct key *x = a, *y = b;

	return x->k < y->k ? -1 : x->k > y->k;
}

static const struct key *find_key(const struct key *keys, size_t n,
				  uint64_t k)
{
	struct key want = { .k = k };

	return n ? bsearch(&want, keys, n, sizeof(*keys), cmp_key) : NULL;
}

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

/* An id that may be a number or a string */
static int id_of(json_t *v, uint64_t *out)
{
	if (json_is_integer(v))
		*out = (uint64_t)json_integer_value(v);
	else if (json_is_string(v))
		*out = hash_str(json_string_value(v));
	else
		return -1;
	return 0;
}

static uint64_t thread_of(json_t *e)
{
	uint64_t pid = 0, tid = 0;

	id_of(json_object_get(e, "pid"), &pid);
	id_of(json_object_get(e, "tid"), &tid);
	return pid * 0x9e3779b97f4a7c15ull ^ tid;
}

static void push_key(struct key **keys, size_t *nr, size_t *alloc,
		     uint64_t k, json_t *e, int ev)
{
	ALLOC_GROW(*keys, *nr + 1, *alloc);
	(*keys)[*nr].k = k;
	(*keys)[*nr].ts = e ? json_number_value(json_object_get(e, "ts")) : 0;
	(*keys)[*nr].thread = e ? thread_of(e) : 0;
	(*keys)[*nr].ev = ev;
	(*nr)++;
}

static int read_all(struct strbuf *sb, const char *path)
{
	gzFile f = gzopen(path, "rb");
	const char *msg;
	int n, errnum = Z_OK;

	if (!f)
		return error_errno("unable to open '%s'", path);
	gzbuffer(f, 1 << 17);
	do {
		strbuf_grow(sb, 1 << 20);
		n = gzread(f, sb->buf + sb->len, 1 << 20);
		if (n > 0)
			strbuf_setlen(sb, sb->len + n);
	} while (n > 0);
	msg = gzerror(f, &errnum);
	if (n < 0 || errnum != Z_OK) {
		/* zlib's message starts with the path */
		if (starts_with(msg, path) && !strncmp(msg + strlen(path), ": ", 2))
			msg += strlen(path) + 2;
		if (errnum == Z_ERRNO)
			error_errno("unable to read '%s'", path);
		else
			error("'%s': corrupt gzip data: %s", path, msg);
		gzclose(f);
		return -1;
	}
	gzclose(f);
	if (!sb->len)
		return error("'%s' is empty", path);
	return 0;
}

static int ev_kind_of(const char *cat)
{
	static const struct {
		const char *cat;
		int kind;
	} cats[] = {
		{ "kernel", EV_KERNEL },
		{ "cuda_runtime", EV_RUNTIME }, { "cuda_driver", EV_RUNTIME },
		{ "runtime", EV_RUNTIME }, { "driver", EV_RUNTIME },
		{ "cpu_op", EV_OP }, { "operator", EV_OP },
		{ "python_function", EV_SCOPE }, { "user_annotation", EV_SCOPE },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cats); i++)
		if (!strcasecmp(cats[i].cat, cat))
			return cats[i].kind;
	return -1;
}

static void add_event(struct trace *t, json_t *e, int kind, double ts,
		      double dur, const char *name)
{
	json_t *args = json_object_get(e, "args");
	struct ev *v;
	uint64_t id;
	int i = (int)t->nr;

	ALLOC_GROW(t->ev, t->nr + 1, t->alloc);
	v = &t->ev[t->nr++];
	memset(v, 0, sizeof(*v));
	v->ts = ts;
	v->end = ts + (dur > 0 ? dur : 0);
	v->thread = thread_of(e);
	v->name = name;
	v->args = args;
	v->kind = kind;
	v->parent = v->link = v->down = v->pos = v->run = -1;
	v->confirmed = v->shape_op = v->back = v->layout = -1;
	v->map = PROF_MAP_NONE;
	if (kind == EV_RUNTIME && !id_of(json_object_get(args, "correlation"),
					 &id))
		push_key(&t->corr, &t->nr_corr, &t->alloc_corr, id, NULL, i);
	if (kind == EV_OP && !id_of(json_object_get(args, "External id"), &id))
		push_key(&t->ext, &t->nr_ext, &t->alloc_ext, id, NULL, i);
	if (kind == EV_OP || kind == EV_SCOPE)
		v->map = prof_map_event(name, kind == EV_OP);
}

static void add_flow(struct trace *t, json_t *e, const char *ph)
{
	uint64_t id;

	if (id_of(json_object_get(e, "id"), &id))
		return;
	if (!strcmp(ph, "s"))
		push_key(&t->fs, &t->nr_fs, &t->alloc_fs, id, e, -1);
	else if (!strcmp(ph, "f"))
		push_key(&t->ff, &t->nr_ff, &t->alloc_ff, id, e, -1);
}

static int collect(struct trace *t, struct profile *p, json_t *events)
{
	size_t i;
	json_t *e;

	json_array_foreach(events, i, e) {
		const char *ph = json_string_value(json_object_get(e, "ph"));
		const char *cat = json_string_value(json_object_get(e, "cat"));
		const char *name = json_string_value(json_object_get(e, "name"));
		json_t *ts = json_object_get(e, "ts");
		int kind;

		if (!ph || !cat)
			continue;
		if (!strcasecmp(cat, "ac2g")) {
			add_flow(t, e, ph);
			continue;
		}
		if (strcmp(ph, "X") || !json_is_number(ts) || !name)
			continue;
		if (!strcasecmp(cat, "gpu_memcpy") ||
		    !strcasecmp(cat, "gpu_memset")) {
			p->memcpy_us += json_number_value(json_object_get(e, "dur"));
			continue;
		}
		kind = ev_kind_of(cat);
		if (kind >= 0)
			add_event(t, e, kind, json_number_value(ts),
				  json_number_value(json_object_get(e, "dur")),
				  name);
	}
	return 0;
}

/* qsort() wants an array, and a trace without launches has none */
static void sort_keys(struct key *keys, size_t n)
{
	if (n)
		qsort(keys, n, sizeof(*keys), cmp_key);
}

/* Sorts the CPU events per thread and gives each its enclosing event. */
static void nest(struct trace *t)
{
	int *stack;
	size_t sp = 0;

	t->cpu = xcalloc(t->nr + 1, sizeof(int));
	t->gpu = xcalloc(t->nr + 1, sizeof(int));
	for (size_t i = 0; i < t->nr; i++) {
		if (t->ev[i].kind == EV_KERNEL)
			t->gpu[t->nr_gpu++] = (int)i;
		else
			t->cpu[t->nr_cpu++] = (int)i;
	}
	sort_trace = t;
	qsort(t->cpu, t->nr_cpu, sizeof(int), cmp_time);
	qsort(t->gpu, t->nr_gpu, sizeof(int), cmp_time);
	sort_keys(t->corr, t->nr_corr);
	sort_keys(t->ext, t->nr_ext);
	sort_keys(t->fs, t->nr_fs);
	stack = xcalloc(t->nr_cpu + 1, sizeof(int));
	for (size_t i = 0; i < t->nr_cpu; i++) {
		struct ev *e = &t->ev[t->cpu[i]];

		e->pos = (int)i;
		while (sp) {
			struct ev *top = &t->ev[stack[sp - 1]];

			if (top->thread == e->thread && e->end <= top->end + EPS_US)
				break;
			sp--;
		}
		e->parent = sp ? stack[sp - 1] : -1;
		stack[sp++] = t->cpu[i];
	}
	free(stack);
}

const char *ev_aten(const struct ev *v)
{
	return v->kind == EV_OP && starts_with(v->name, "aten::") ?
	       v->name + 6 : NULL;
}

/* The last event of list (sorted) on thread starting at or before ts. */
static int last_before(const struct trace *t, const int *list, size_t n,
		       uint64_t thread, double ts)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct ev *e = &t->ev[list[mid]];

		if (e->thread < thread ||
		    (e->thread == thread && e->ts <= ts + EPS_US))
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo || t->ev[list[lo - 1]].thread != thread)
		return -1;
	return list[lo - 1];
}

/* The innermost CPU event on thread around ts. */
static int enclosing(const struct trace *t, uint64_t thread, double ts)
{
	int e = last_before(t, t->cpu, t->nr_cpu, thread, ts);

	while (e >= 0 && t->ev[e].end < ts - EPS_US)
		e = t->ev[e].parent;
	return e;
}

/* Each kernel's launching CPU event, by correlation, flow or op id. */
static void link_kernels(struct trace *t)
{
	for (size_t i = 0; i < t->nr_gpu; i++) {
		struct ev *k = &t->ev[t->gpu[i]];
		const struct key *r;
		uint64_t id;

		if (!id_of(json_object_get(k->args, "correlation"), &id) &&
		    (r = find_key(t->corr, t->nr_corr, id)))
			k->link = r->ev;
	}
	for (size_t i = 0; i < t->nr_ff; i++) {
		const struct key *f = &t->ff[i], *s;
		int k = last_before(t, t->gpu, t->nr_gpu, f->thread, f->ts);

		if (k < 0 || t->ev[k].link >= 0 ||
		    t->ev[k].end < f->ts - EPS_US)
			continue;
		s = find_key(t->fs, t->nr_fs, f->k);
		if (s)
			t->ev[k].link = enclosing(t, s->thread, s->ts);
	}
	for (size_t i = 0; i < t->nr_gpu; i++) {
		struct ev *k = &t->ev[t->gpu[i]];
		const struct key *r;
		uint64_t id;

		if (k->link < 0 &&
		    !id_of(json_object_get(k->args, "External id"), &id) &&
		    (r = find_key(t->ext, t->nr_ext, id)))
			k->link = r->ev;
	}
}

/*
 * Calls fn on the CPU events inside event a, in time order, until it
 * returns non-zero; returns that.
 */
static int each_inside(struct trace *t, int a,
		       int (*fn)(struct trace *t, int a, int e, void *data),
		       void *data)
{
	const struct ev *anchor = &t->ev[a];
	size_t n = 0;
	int r;

	for (size_t j = anchor->pos + 1; j < t->nr_cpu && n < MAX_SCAN;
	     j++, n++) {
		const struct ev *e = &t->ev[t->cpu[j]];

		if (e->thread != anchor->thread ||
		    e->ts > anchor->end + EPS_US)
			break;
		if (e->end <= anchor->end + EPS_US &&
		    (r = fn(t, a, t->cpu[j], data)))
			return r;
	}
	return 0;
}

struct contents {
	int matmuls, parts, down, rotates, halves;
};

static int contents_step(struct trace *t, int a, int e, void *data)
{
	struct contents *c = data;
	const struct ev *v = &t->ev[e];
	const char *op = ev_aten(v);

	if (v->kind != EV_OP)
		return 0;
	c->parts |= prof_swiglu_part(v->name);
	if (op && (!strcmp(op, "neg") || !strcmp(op, "view_as_complex")))
		c->rotates = 1;
	if (op && !strcmp(op, "cat"))
		c->halves = 1;
	if (!prof_is_matmul(v->name))
		return 0;
	/* only the outermost matmul op: linear, not the addmm inside it */
	for (int up = v->parent; up >= 0 && up != a; up = t->ev[up].parent)
		if (t->ev[up].kind == EV_OP && prof_is_matmul(t->ev[up].name))
			return 0;
	c->matmuls++;
	c->down = e;
	return 0;
}

/*
 * A scope named like an MLP is fused_mlp when it holds what SwiGLU is
 * made of: silu, a product, and two or three matmuls (gate and up may be
 * one), the last of them the down projection.  Anything else (GELU, more
 * layers) is not.  One named like rotary must rotate: a neg (rotate_half,
 * rotate_every_two) or a complex product; a cat beside the neg makes it
 * half-split.
 */
static int confirmed(struct trace *t, int a)
{
	struct ev *v = &t->ev[a];
	struct contents c = { 0, 0, -1, 0, 0 };

	if (v->confirmed >= 0)
		return v->confirmed;
	each_inside(t, a, contents_step, &c);
	if (v->map == PROF_MAP_MLP) {
		v->confirmed = c.parts == 3 &&
			       (c.matmuls == 2 || c.matmuls == 3);
		v->down = c.down;
	} else {
		v->confirmed = c.rotates;
		v->layout = c.halves ? ROTARY_HALF : ROTARY_INTERLEAVED;
	}
	return v->confirmed;
}

struct shape_find {
	int opi;
	struct ev *anchor;
};

static int shape_from(struct trace *t, int opi, int e, struct ev *into)
{
	const struct ev *v = &t->ev[e];

	if (v->kind != EV_OP)
		return 0;
	return !prof_shape_from_op(opi, v->name, v->args, &into->shape,
				   &into->dt, &into->dt_known);
}

static int shape_step(struct trace *t, int a, int e, void *data)
{
	struct shape_find *f = data;

	(void)a;
	return shape_from(t, f->opi, e, f->anchor);
}

/* The anchor's shape for op opi: its own sizes, else its first op's. */
static void anchor_shape(struct trace *t, int a, int opi)
{
	struct ev *v = &t->ev[a];
	struct shape_find f = { opi, v };

	if (v->shape_op == opi)
		return;
	v->shape_op = opi;
	if (!strcmp(ops[opi]->name, "fused_mlp"))
		v->shape_ok = v->down >= 0 && shape_from(t, opi, v->down, v);
	else
		v->shape_ok = shape_from(t, opi, a, v) ||
			      each_inside(t, a, shape_step, &f);
}

struct hit {
	int opi;                /* op index, or -1 */
	int anchor;             /* the event a call is counted on, or -1 */
	const struct run *run;  /* the run that says so, or NULL */
	const char *what;       /* not covered: what launched it */
};

/* Rule 2: the outermost scope or op of the chain that names an op. */
static int by_chain(struct trace *t, const int *chain, int n, int back,
		    struct hit *h)
{
	for (int i = n - 1; i >= 0; i--) {
		struct ev *v = &t->ev[chain[i]];

		if (back && !(v->kind == EV_OP && prof_is_matmul(v->name)))
			continue;
		if ((v->map == PROF_MAP_MLP || v->map == PROF_MAP_ROTARY) &&
		    confirmed(t, chain[i])) {
			h->opi = prof_op_index(v->map == PROF_MAP_MLP ?
					       "fused_mlp" :
					       "rotary_embedding");
			h->anchor = chain[i];
			return 1;
		}
		if (v->map >= 0) {
			h->opi = v->map;
			h->anchor = chain[i];
			return 1;
		}
	}
	return 0;
}

/*
 * The op of kernel k and the event its call is counted on (rules at the
 * top of this file); in a backward pass, gemms only.
 */
static void classify(struct trace *t, const struct ev *k, struct hit *h)
{
	int chain[MAX_CHAIN], n = 0, back = 0, inner_op = -1, top = -1;
	enum ak_dtype dt;
	int known;

	for (int e = k->link; e >= 0 && n < MAX_CHAIN; e = t->ev[e].parent) {
		if (t->ev[e].kind == EV_RUNTIME)
			continue;
		chain[n++] = e;
		if (t->ev[e].back < 0)
			t->ev[e].back = prof_is_backward(t->ev[e].name);
		back |= t->ev[e].back;
		if (inner_op < 0 && t->ev[e].kind == EV_OP)
			inner_op = e;
		if (t->ev[e].top)
			top = e;
	}
	h->run = NULL;
	h->anchor = inner_op >= 0 ? inner_op : n ? chain[0] : -1;
	h->what = h->anchor >= 0 ? t->ev[h->anchor].name : NULL;
	if (!back && top >= 0 && t->ev[top].run >= 0) {
		h->run = &t->runs[t->ev[top].run];
		h->opi = h->run->opi;
		h->anchor = h->run->head;
		if (h->opi < 0)
			h->what = h->run->label;
		return;
	}
	if (by_chain(t, chain, n, back, h))
		return;
	h->opi = prof_map_kernel(k->name, &dt, &known);
	if (back && h->opi != prof_op_index("matmul"))
		h->opi = -1;
}

/* The call's shape, dtype and layout: the run's, else the anchor's. */
static void call_shape(struct trace *t, const struct hit *h, const char *kname,
		       struct prof_shape *at)
{
	struct ev *a = &t->ev[h->anchor];

	memset(at, 0, sizeof(*at));
	at->layout = -1;
	prof_map_kernel(kname, &at->dt, &at->dt_known);
	if (h->run) {
		if (h->run->shape_ok)
			at->s = h->run->shape;
		if (h->run->dt_known) {
			at->dt = h->run->dt;
			at->dt_known = 1;
		}
		at->layout = h->run->layout;
		return;
	}
	anchor_shape(t, h->anchor, h->opi);
	if (a->shape_ok)
		at->s = a->shape;
	if (a->dt_known) {
		at->dt = a->dt;
		at->dt_known = 1;
	}
	if (a->map == PROF_MAP_ROTARY)
		at->layout = a->layout;
}

static void add_kernel(struct trace *t, struct profile *p, struct ev *k)
{
	struct prof_shape at;
	struct hit h;
	struct ev *a;
	int new_call, bit;
	char what[128];

	classify(t, k, &h);
	if (h.anchor < 0) {
		memset(&at, 0, sizeof(at));
		at.layout = -1;
		if (h.opi >= 0)
			prof_map_kernel(k->name, &at.dt, &at.dt_known);
		prof_short_name(what, sizeof(what), k->name);
		profile_add_at(p, h.opi, &at, k->end - k->ts, 1, what);
		return;
	}
	a = &t->ev[h.anchor];
	bit = 1u << (h.opi + 1);
	new_call = !(a->seen & bit);
	a->seen |= bit;
	if (h.opi < 0) {
		profile_add(p, -1, NULL, NULL, k->end - k->ts, new_call, h.what);
		return;
	}
	call_shape(t, &h, k->name, &at);
	profile_add_at(p, h.opi, &at, k->end - k->ts, new_call, NULL);
}

static void trace_release(struct trace *t)
{
	json_decref(t->root);
	free(t->ev);
	free(t->cpu);
	free(t->gpu);
	free(t->corr);
	free(t->ext);
	free(t->fs);
	free(t->ff);
	free(t->runs);
}

static void device_name(struct profile *p, json_t *root)
{
	json_t *d = json_array_get(json_object_get(root, "deviceProperties"), 0);
	const char *n = json_string_value(json_object_get(d, "name"));

	if (n && *n && !p->device)
		p->device = xstrdup(n);
}

static int read_trace(struct profile *p, const char *path, int may_be_empty)
{
	struct strbuf sb = STRBUF_INIT;
	struct trace t = { 0 };
	json_error_t jerr;
	json_t *events;
	int ret = -1;

	if (read_all(&sb, path) < 0)
		goto cleanup;
	t.root = json_loadb(sb.buf, sb.len, 0, &jerr);
	strbuf_release(&sb);
	if (!t.root) {
		error("'%s': malformed JSON at line %d, column %d: %s", path,
		      jerr.line, jerr.column, jerr.text);
		goto cleanup;
	}
	events = json_is_array(t.root) ? t.root :
		 json_object_get(t.root, "traceEvents");
	if (!json_is_array(events)) {
		error("'%s' is not a chrome trace: it has no \"traceEvents\"",
		      path);
		goto cleanup;
	}
	device_name(p, t.root);
	collect(&t, p, events);
	nest(&t);
	if (!t.nr_gpu) {
		if (may_be_empty)
			ret = 0;
		else
			error("'%s' has no GPU kernel events (profile with "
			      "activities=[ProfilerActivity.CUDA])", path);
		goto cleanup;
	}
	trace_find_runs(&t);
	link_kernels(&t);
	for (size_t i = 0; i < t.nr; i++)
		if (t.ev[i].kind == EV_KERNEL)
			add_kernel(&t, p, &t.ev[i]);
	ret = 0;
cleanup:
	strbuf_release(&sb);
	trace_release(&t);
	return ret;
}

int profile_read_trace(struct profile *p, const char *path)
{
	return read_trace(p, path, 0);
}

int profile_add_trace(struct profile *p, const char *path)
{
	return read_trace(p, path, 1);
}
