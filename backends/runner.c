/*
 * runner.c: the process that runs kernels, one per backend (ak-runner-host,
 * ak-runner-cuda, ak-runner-hip), always a child of git-autokernel.
 *
 * It reads one JSON request per line on stdin and answers one JSON line on
 * stdout.  Tensor data travels through a file the parent maps (shm): the
 * request gives each tensor's dtype, shape and offset in it.  Requests:
 *
 *   {"req":"hello"}                        device description
 *   {"req":"load","slot":N,"path":SO}      dlopen a built kernel
 *   {"req":"call","slot":N,"shm":P,"size":S,"tensors":[...],"scalar":[...]}
 *        one checked call: guard bands, poisoned outputs, input checks;
 *        outputs copied back into shm
 *   {"req":"bench","slots":[..],"outs":[[off..]..],"copy_bytes":B,...}
 *        interleaved timing of the slots and of a device copy
 *   {"req":"ceilings"}                     copy bandwidth, matrix rates
 *
 * A kernel that crashes the process, hangs, or leaves the device in a
 * sticky error state is the parent's to report: it sees EOF, a signal or
 * its own time limit.  The runner never hides an error to keep going.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <jansson.h>
#include "ak-wire.h"
#include "autokernel.h"
#include "backends/dev.h"
#include "lib/strbuf.h"
#include "lib/trace.h"

#define MAX_SLOTS AK_WIRE_SLOTS
#define MAX_TENSORS AK_WIRE_MAX_TENSORS
#define GUARD AK_WIRE_GUARD
#define GUARD_BYTE AK_WIRE_GUARD_BYTE
#define POISON_BYTE AK_WIRE_POISON_BYTE

typedef int (*kernel_fn)(const struct ak_args *);
typedef size_t (*workspace_fn)(const struct ak_args *);

static struct {
	void *handle;
	kernel_fn fn;
	workspace_fn ws;
} slots[MAX_SLOTS];

static unsigned char *shm;
static size_t shm_size;
static char shm_path[4096];

/* A device buffer with GUARD bytes on both sides. */
struct gbuf {
	unsigned char *base;    /* allocation */
	void *data;             /* base + GUARD */
	size_t size;            /* of data */
};

static json_t *fail(const char *fmt, ...) AK_PRINTF(1, 2);
static json_t *fail(const char *fmt, ...)
{
	struct strbuf sb = STRBUF_INIT;
	va_list ap;
	json_t *r;

	va_start(ap, fmt);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	r = json_pack("{s:b,s:s,s:b}", "ok", 0, "error", sb.buf,
		      "fatal", dev_sticky());
	strbuf_release(&sb);
	return r;
}

static int gbuf_alloc(struct gbuf *g, size_t size)
{
	g->size = size;
	if (dev_alloc((void **)&g->base, size + 2 * GUARD))
		return -1;
	g->data = g->base + GUARD;
	if (dev_fill(g->base, GUARD_BYTE, GUARD) ||
	    dev_fill(g->base + GUARD + size, GUARD_BYTE, GUARD))
		return -1;
	return 0;
}

static void gbuf_free(struct gbuf *g)
{
	if (g->base)
		dev_free(g->base);
	g->base = NULL;
}

/* Which guard byte changed, as "N bytes before/after", or 0. */
static int gbuf_check(const struct gbuf *g, char *what, size_t n)
{
	unsigned char head[GUARD], tail[GUARD];

	if (dev_d2h(head, g->base, GUARD) ||
	    dev_d2h(tail, g->base + GUARD + g->size, GUARD))
		return -1;
	for (size_t i = GUARD; i-- > 0;)
		if (head[i] != GUARD_BYTE) {
			snprintf(what, n, "%zu bytes before the start",
				 GUARD - i);
			return 1;
		}
	for (size_t i = 0; i < GUARD; i++)
		if (tail[i] != GUARD_BYTE) {
			snprintf(what, n, "%zu bytes after the end", i + 1);
			return 1;
		}
	return 0;
}

static int map_shm(const char *path, size_t size)
{
	int fd;

	if (shm && !strcmp(path, shm_path) && size <= shm_size)
		return 0;
	if (shm)
		munmap(shm, shm_size);
	shm = NULL;
	fd = open(path, O_RDWR);
	if (fd < 0)
		return -1;
	/* populated: one call maps every page, not a fault per page */
	shm = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED |
		   MAP_POPULATE, fd, 0);
	close(fd);
	if (shm == MAP_FAILED) {
		shm = NULL;
		return -1;
	}
	shm_size = size;
	snprintf(shm_path, sizeof(shm_path), "%s", path);
	return 0;
}

/* The tensors of a request, described in the ABI's terms. */
struct layout {
	int n_in, n_out;
	struct ak_tensor in[MAX_TENSORS], out[MAX_TENSORS];
	size_t in_off[MAX_TENSORS], out_off[MAX_TENSORS];
	double scalar[4];
};

static size_t tensor_bytes(const struct ak_tensor *t)
{
	return (size_t)ak_numel(t) * ak_dtype_size(t->dtype);
}

static int parse_tensor(json_t *j, struct ak_tensor *t, size_t *off)
{
	json_t *shape = json_object_get(j, "shape");
	int64_t stride = 1;

	memset(t, 0, sizeof(*t));
	t->dtype = (enum ak_dtype)json_integer_value(json_object_get(j, "dtype"));
	t->ndim = (int)json_array_size(shape);
	*off = (size_t)json_integer_value(json_object_get(j, "offset"));
	if (t->ndim > 4 || !ak_dtype_size(t->dtype))
		return -1;
	for (int d = 0; d < t->ndim; d++)
		t->shape[d] = json_integer_value(json_array_get(shape, d));
	for (int d = t->ndim - 1; d >= 0; d--) {
		t->stride[d] = stride;
		stride *= t->shape[d];
	}
	return *off + tensor_bytes(t) <= shm_size ? 0 : -1;
}

static int parse_layout(json_t *req, struct layout *l)
{
	json_t *ts = json_object_get(req, "tensors"), *sc, *t;
	size_t i;

	memset(l, 0, sizeof(*l));
	if (map_shm(json_string_value(json_object_get(req, "shm")) ?
		    json_string_value(json_object_get(req, "shm")) : "",
		    (size_t)json_integer_value(json_object_get(req, "size"))))
		return -1;
	json_array_foreach(ts, i, t) {
		int out = json_is_true(json_object_get(t, "out"));
		int *n = out ? &l->n_out : &l->n_in;

		if (*n >= MAX_TENSORS)
			return -1;
		if (parse_tensor(t, out ? &l->out[*n] : &l->in[*n],
				 out ? &l->out_off[*n] : &l->in_off[*n]))
			return -1;
		(*n)++;
	}
	sc = json_object_get(req, "scalar");
	for (i = 0; i < 4 && i < json_array_size(sc); i++)
		l->scalar[i] = json_number_value(json_array_get(sc, i));
	return 0;
}

/* Device copies of a layout: inputs filled, outputs poisoned, workspace. */
struct dset {
	struct gbuf in[MAX_TENSORS], out[MAX_TENSORS], ws;
	struct ak_tensor tin[MAX_TENSORS], tout[MAX_TENSORS];
	struct ak_args args;
};

static void dset_free(struct dset *s)
{
	for (int i = 0; i < MAX_TENSORS; i++) {
		gbuf_free(&s->in[i]);
		gbuf_free(&s->out[i]);
	}
	gbuf_free(&s->ws);
}

static int dset_inputs(struct dset *s, const struct layout *l)
{
	for (int i = 0; i < l->n_in; i++) {
		size_t n = tensor_bytes(&l->in[i]);

		if (gbuf_alloc(&s->in[i], n) ||
		    dev_h2d(s->in[i].data, shm + l->in_off[i], n))
			return -1;
		s->tin[i] = l->in[i];
		s->tin[i].data = s->in[i].data;
	}
	return 0;
}

static int dset_outputs(struct dset *s, const struct layout *l, int slot)
{
	for (int i = 0; i < l->n_out; i++) {
		size_t n = tensor_bytes(&l->out[i]);

		if (gbuf_alloc(&s->out[i], n) ||
		    dev_fill(s->out[i].data, POISON_BYTE, n))
			return -1;
		s->tout[i] = l->out[i];
		s->tout[i].data = s->out[i].data;
	}
	s->args.n_in = l->n_in;
	s->args.n_out = l->n_out;
	s->args.in = s->tin;
	s->args.out = s->tout;
	memcpy(s->args.scalar, l->scalar, sizeof(l->scalar));
	s->args.stream = dev_stream();
	s->args.workspace = NULL;
	s->args.workspace_size = 0;
	if (slots[slot].ws) {
		size_t n = slots[slot].ws(&s->args);

		if (n > ((size_t)1 << 40))
			return -2;
		if (gbuf_alloc(&s->ws, n))
			return -1;
		s->args.workspace = s->ws.data;
		s->args.workspace_size = n;
	}
	return 0;
}

/* Where inputs come back to be compared: one buffer for the runner's
 * life, so its pages are faulted in once, not on every call. */
static unsigned char *check_buffer(size_t n)
{
	static unsigned char *buf;
	static size_t cap;

	if (n > cap || !buf) {
		free(buf);
		cap = n > 2 * cap ? n : 2 * cap;
		buf = xmalloc(cap ? cap : 1);
	}
	return buf;
}

/* One guard band's verdict as "wrote outside output 0: 3 bytes after the
 * end" into what; 0 intact, 1 not, -1 device error. */
static int guard_verdict(const struct gbuf *g, const char *whose, int i,
			 char *what, size_t n)
{
	char where[96];
	int r;

	if (!g->base || (r = gbuf_check(g, where, sizeof(where))) == 0)
		return 0;
	if (r > 0) {
		if (i >= 0)
			snprintf(what, n, "wrote outside %s %d: %s", whose, i,
				 where);
		else
			snprintf(what, n, "wrote outside its %s: %s", whose,
				 where);
	}
	return r;
}

/* The guard bands of a set's outputs, then (with ws) its workspace's,
 * then its inputs' intact: 0, 1 (what says which), -1. */
static int dset_guards_of(const struct dset *s, const struct layout *l,
			  int ws, char *what, size_t n)
{
	int r = 0;

	for (int i = 0; !r && i < l->n_out; i++)
		r = guard_verdict(&s->out[i], "output", i, what, n);
	if (!r && ws)
		r = guard_verdict(&s->ws, "workspace", -1, what, n);
	for (int i = 0; !r && i < l->n_in; i++)
		r = guard_verdict(&s->in[i], "input", i, what, n);
	return r;
}

/* Every guard band of a set intact: 0, 1 (what says which), -1. */
static int dset_guards(const struct dset *s, const struct layout *l,
		       char *what, size_t n)
{
	return dset_guards_of(s, l, 1, what, n);
}

/* Guard bands intact, inputs unchanged: 0, 1 (why says what went
 * wrong), -1 device error. */
static int dset_integrity(struct dset *s, const struct layout *l,
			  struct strbuf *why)
{
	char what[160];
	int r = dset_guards(s, l, what, sizeof(what));

	if (r) {
		if (r > 0)
			strbuf_addstr(why, what);
		return r;
	}
	for (int i = 0; i < l->n_in; i++) {
		size_t n = tensor_bytes(&l->in[i]);
		unsigned char *copy = check_buffer(n);

		if (dev_d2h(copy, s->in[i].data, n))
			return -1;
		if (memcmp(copy, shm + l->in_off[i], n)) {
			size_t b = 0;

			while (copy[b] == shm[l->in_off[i] + b])
				b++;
			strbuf_addf(why, "modified input %d at element %zu", i,
				    b / ak_dtype_size(l->in[i].dtype));
			return 1;
		}
	}
	return 0;
}

static json_t *device_info;
static char init_error[512];

static json_t *req_hello(void)
{
	if (!device_info)
		return json_pack("{s:b,s:s,s:b}", "ok", 0, "error", init_error,
				 "no_device", 1);
	return json_incref(device_info);
}

static json_t *req_load(json_t *req)
{
	int slot = (int)json_integer_value(json_object_get(req, "slot"));
	const char *path = json_string_value(json_object_get(req, "path"));
	long long t0;
	void *h;

	if (slot < 0 || slot >= MAX_SLOTS || !path)
		return fail("bad load request");
	if (slots[slot].handle)
		dlclose(slots[slot].handle);
	memset(&slots[slot], 0, sizeof(slots[slot]));
	t0 = now_ns();
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return fail("cannot load the kernel: %s", dlerror());
	trace("runner", "load: dlopen %.2f ms", ms_since(t0));
	slots[slot].handle = h;
	*(void **)&slots[slot].fn = dlsym(h, "ak_kernel");
	*(void **)&slots[slot].ws = dlsym(h, "ak_workspace_size");
	if (!slots[slot].fn)
		return fail("the kernel does not define ak_kernel()");
	return json_pack("{s:b,s:b}", "ok", 1, "workspace", !!slots[slot].ws);
}

static json_t *checked_call(int slot, struct dset *s, int *rc)
{
	*rc = slots[slot].fn(&s->args);
	if (dev_after_call())
		return fail("%s", dev_error());
	return NULL;
}

static json_t *req_call(json_t *req)
{
	int slot = (int)json_integer_value(json_object_get(req, "slot"));
	struct layout l;
	struct dset s;
	struct strbuf why = STRBUF_INIT;
	json_t *res = NULL;
	int rc = 0, r;
	long long t0 = now_ns(), t1, t2, t3, t4;

	memset(&s, 0, sizeof(s));
	if (slot < 0 || slot >= MAX_SLOTS || !slots[slot].fn)
		return fail("no kernel loaded in slot %d", slot);
	if (parse_layout(req, &l))
		return fail("bad tensor layout in request");
	if (dset_inputs(&s, &l)) {
		res = fail("%s", dev_error());
		goto cleanup;
	}
	t1 = now_ns();
	if ((r = dset_outputs(&s, &l, slot)) == -1) {
		res = fail("%s", dev_error());
		goto cleanup;
	}
	if (r == -2) {
		res = fail("ak_workspace_size() asked for an absurd size");
		goto cleanup;
	}
	t2 = now_ns();
	if ((res = checked_call(slot, &s, &rc)))
		goto cleanup;
	t3 = now_ns();
	if ((r = dset_integrity(&s, &l, &why)) < 0) {
		res = fail("%s", dev_error());
		goto cleanup;
	}
	t4 = now_ns();
	for (int i = 0; i < l.n_out; i++)
		if (dev_d2h(shm + l.out_off[i], s.out[i].data,
			    tensor_bytes(&l.out[i]))) {
			res = fail("%s", dev_error());
			goto cleanup;
		}
	trace("runner", "call: inputs %.2f ms, outputs %.2f, kernel %.2f, "
	      "checks %.2f, outputs back %.2f", (t1 - t0) / 1e6,
	      (t2 - t1) / 1e6, (t3 - t2) / 1e6, (t4 - t3) / 1e6,
	      ms_since(t4));
	res = json_pack("{s:b,s:i}", "ok", 1, "rc", rc);
	if (r)
		json_object_set_new(res, "integrity", json_string(why.buf));
	json_object_set_new(res, "workspace_bytes",
			    json_integer((json_int_t)s.args.workspace_size));
cleanup:
	t0 = now_ns();
	dset_free(&s);
	strbuf_release(&why);
	trace("runner", "call: freed in %.2f ms", ms_since(t0));
	return res;
}

/*
 * Interleaved timing with fresh inputs for every call
 * (doc/runner-protocol.md).  A round times every slot once, then a device
 * copy of copy_bytes (the op's minimum traffic: half read, half written),
 * so A and B see the same clocks and the same thermal state.  The rounds
 * take turns (round_slot(), round_set()) at which slot goes first and on
 * which set of buffers each slot runs: with both fixed, two builds of one
 * kernel differed by up to 1.3% at a shape on an H100 and an H200, a
 * bias handed to one side; with the turns, -0.5% to +0.15% on an H200.
 * Before call k its inputs are generated afresh on the device from
 * ak_call_seed(seed, k) and its outputs poisoned, then the cache is
 * flushed; after it the parent picks the elements it checks and the
 * runner copies them back.
 */
struct bench {
	int n_slots, slot[MAX_SLOTS], lockstep;
	struct dset set[MAX_SLOTS];
	struct layout l;
	struct ak_gen gen[MAX_TENSORS];
	uint64_t seed, calls;
	void *copy_src, *copy_dst;
	size_t copy_bytes, check_off, check_bytes;
	json_t *times[MAX_SLOTS + 1];
	json_t *sets[MAX_SLOTS], *positions[MAX_SLOTS];
	int user[MAX_SLOTS];    /* the slot on each set since its check */
	char *line;             /* the parent's answers */
	size_t cap;
};

static int parse_gen(json_t *j, struct ak_gen *g)
{
	const char *kind = json_string_value(json_object_get(j, "kind"));

	memset(g, 0, sizeof(*g));
	g->sd = 1.0f;
	if (kind && !strcmp(kind, "index")) {
		g->kind = AK_GEN_INDEX;
		g->n = json_integer_value(json_object_get(j, "n"));
		return g->n > 0 ? 0 : -1;
	}
	g->kind = AK_GEN_NORMAL;
	if (json_is_number(json_object_get(j, "mean")))
		g->mean = (float)json_number_value(json_object_get(j, "mean"));
	if (json_is_number(json_object_get(j, "sd")))
		g->sd = (float)json_number_value(json_object_get(j, "sd"));
	return kind && !strcmp(kind, "normal") ? 0 : -1;
}

static int parse_gens(json_t *req, const struct layout *l, struct ak_gen *g)
{
	json_t *js = json_object_get(req, "gen");

	if (json_array_size(js) != (size_t)l->n_in)
		return -1;
	for (int i = 0; i < l->n_in; i++)
		if (parse_gen(json_array_get(js, i), &g[i]))
			return -1;
	return 0;
}

static int bench_prepare(struct bench *b, json_t *req, struct strbuf *why)
{
	json_t *js = json_object_get(req, "slots");

	b->n_slots = (int)json_array_size(js);
	b->lockstep = json_is_true(json_object_get(req, "lockstep"));
	b->seed = (uint64_t)json_integer_value(json_object_get(req, "seed"));
	if (b->n_slots < 1 || b->n_slots > MAX_SLOTS - 1) {
		strbuf_addstr(why, "bad slot list");
		return -1;
	}
	for (int i = 0; i < b->n_slots; i++) {
		b->slot[i] = (int)json_integer_value(json_array_get(js, i));
		if (b->slot[i] < 0 || b->slot[i] >= MAX_SLOTS ||
		    !slots[b->slot[i]].fn) {
			strbuf_addf(why, "no kernel loaded in slot %d", b->slot[i]);
			return -1;
		}
	}
	if (parse_layout(req, &b->l) || parse_gens(req, &b->l, b->gen)) {
		strbuf_addstr(why, "bad tensor layout in request");
		return -1;
	}
	b->check_off = (size_t)json_integer_value(json_object_get(req,
							"check_offset"));
	b->check_bytes = (size_t)json_integer_value(json_object_get(req,
							"check_bytes"));
	if (b->check_off + 2 * b->check_bytes > shm_size) {
		strbuf_addstr(why, "the check area is outside the mapping");
		return -1;
	}
	for (int i = 0; i < b->n_slots; i++) {
		int r = dset_inputs(&b->set[i], &b->l);

		if (!r)
			r = dset_outputs(&b->set[i], &b->l, b->slot[i]);
		if (r) {
			strbuf_addstr(why, r == -2 ? "ak_workspace_size() "
				      "asked for an absurd size" : dev_error());
			return -1;
		}
	}
	b->copy_bytes = (size_t)json_integer_value(json_object_get(req,
							"copy_bytes")) / 2;
	if (b->copy_bytes &&
	    (dev_alloc(&b->copy_src, b->copy_bytes) ||
	     dev_alloc(&b->copy_dst, b->copy_bytes) ||
	     dev_fill(b->copy_src, 0x3c, b->copy_bytes))) {
		strbuf_addstr(why, dev_error());
		return -1;
	}
	return 0;
}

/* A set's inputs made afresh from seed and its outputs poisoned. */
static int refresh(struct dset *s, const struct layout *l,
		   const struct ak_gen *gen, uint64_t seed)
{
	for (int t = 0; t < l->n_in; t++)
		if (dev_generate(s->in[t].data, l->in[t].dtype,
				 ak_numel(&l->in[t]), &gen[t], seed, t))
			return -1;
	for (int t = 0; t < l->n_out; t++)
		if (dev_fill(s->out[t].data, POISON_BYTE,
			     tensor_bytes(&l->out[t])))
			return -1;
	return dev_sync();
}

/* The parent's next line as JSON; NULL at EOF or on garbage. */
static json_t *read_answer(struct bench *b)
{
	if (getline(&b->line, &b->cap, stdin) <= 0)
		return NULL;
	return json_loads(b->line, 0, NULL);
}

static void say(FILE *out, json_t *msg)
{
	json_dumpf(msg, out, JSON_COMPACT);
	fputc('\n', out);
	fflush(out);
	json_decref(msg);
}

/* Tensor t of the request's list: inputs first, then outputs. */
static const struct gbuf *span_buf(const struct dset *s,
				   const struct layout *l, int t,
				   const struct ak_tensor **tt)
{
	if (t >= 0 && t < l->n_in) {
		*tt = &l->in[t];
		return &s->in[t];
	}
	t -= l->n_in;
	if (t < 0 || t >= l->n_out)
		return NULL;
	*tt = &l->out[t];
	return &s->out[t];
}

/* The spans the parent asked for, into the check area of call k;
 * 0, -1 device error, 1 a bad request (why). */
static int copy_spans(struct bench *b, const struct dset *s, json_t *spans,
		      uint64_t k, struct strbuf *why)
{
	unsigned char *dst = shm + b->check_off + (k & 1) * b->check_bytes;
	size_t used = 0, i;
	json_t *sp;

	json_array_foreach(spans, i, sp) {
		int t = (int)json_integer_value(json_array_get(sp, 0));
		int64_t e = json_integer_value(json_array_get(sp, 1));
		int64_t n = json_integer_value(json_array_get(sp, 2));
		const struct ak_tensor *tt = NULL;
		const struct gbuf *g = span_buf(s, &b->l, t, &tt);
		size_t es, bytes;

		if (!g || e < 0 || n < 0 || e + n > ak_numel(tt)) {
			strbuf_addstr(why, "a span outside its tensor");
			return 1;
		}
		es = ak_dtype_size(tt->dtype);
		bytes = (size_t)n * es;
		if (used + bytes > b->check_bytes) {
			strbuf_addstr(why, "spans larger than the check area");
			return 1;
		}
		if (dev_d2h(dst + used, (const unsigned char *)g->data +
			    (size_t)e * es, bytes))
			return -1;
		used += bytes;
	}
	return 0;
}

/*
 * The schedule of n slots: round r times, at position p, the slot
 * round_slot(), and slot i on the buffers of set round_set().  Over n * n
 * rounds every slot is timed once at every position on every set (i's
 * position is (i - r) mod n, its set (i + r / n) mod n: the two run
 * through their values independently).
 */
static int round_slot(int n, uint64_t r, int p)
{
	return (int)((p + r) % (uint64_t)n);
}

static int round_set(int n, uint64_t r, int i)
{
	return (int)((i + r / (uint64_t)n) % (uint64_t)n);
}

/*
 * Call k: slot i on set j (its inputs and outputs; the workspace is always
 * set i's, sized for slot i's kernel): fresh inputs, poisoned outputs, a
 * cold cache, the timed call, then the parent's choice of what to check.
 * 0 go on, 1 stop (the parent said so), or a reply that ends the
 * benchmark in *res.
 */
static int timed_call(struct bench *b, int i, int j, FILE *out, double *us,
		      json_t **res)
{
	uint64_t k = b->calls++, seed = ak_call_seed(b->seed, k);
	struct strbuf why = STRBUF_INIT;
	struct ak_args args = b->set[j].args;
	json_t *ans;
	int rc = 0, stop, r;

	args.workspace = b->set[i].args.workspace;
	args.workspace_size = b->set[i].args.workspace_size;
	if (refresh(&b->set[j], &b->l, b->gen, seed) ||
	    dev_flush_cache() || dev_timer_start()) {
		*res = fail("%s", dev_error());
		return -1;
	}
	rc = slots[b->slot[i]].fn(&args);
	if (dev_timer_stop(us) || dev_after_call()) {
		*res = fail("%s", dev_error());
		return -1;
	}
	if (rc) {
		*res = json_pack("{s:b,s:i,s:i}", "ok", 1, "rc", rc, "slot",
				 b->slot[i]);
		return -1;
	}
	say(out, json_pack("{s:I,s:i,s:I,s:f}", "call", (json_int_t)k,
			   "slot", b->slot[i], "seed", (json_int_t)seed,
			   "us", *us));
	if (!(ans = read_answer(b))) {
		*res = fail("the parent went away during the benchmark");
		return -1;
	}
	stop = json_is_true(json_object_get(ans, "stop"));
	r = copy_spans(b, &b->set[j], json_object_get(ans, "spans"), k, &why);
	json_decref(ans);
	if (r) {
		*res = r < 0 ? fail("%s", dev_error()) : fail("%s", why.buf);
		strbuf_release(&why);
		return -1;
	}
	say(out, json_pack("{s:I}", "copied", (json_int_t)k));
	if (b->lockstep) {
		ans = read_answer(b);
		if (!ans)
			stop = 1;
		stop |= json_is_true(json_object_get(ans, "stop"));
		json_decref(ans);
	}
	return stop;
}

/*
 * Before a round: the guard bands of every set about to change hands,
 * checked, so that a write outside a set's inputs or outputs is laid on
 * the one kernel that ran on it since (r: the coming round; -1: after
 * the last).  NULL, or the reply that ends the benchmark.  A workspace
 * never changes hands: bench_finish() checks those.
 */
static json_t *hand_over(struct bench *b, int64_t r)
{
	char what[160];

	for (int j = 0; j < b->n_slots; j++) {
		int next = -1, u = b->user[j], g;

		for (int i = 0; r >= 0 && i < b->n_slots; i++)
			if (round_set(b->n_slots, (uint64_t)r, i) == j)
				next = i;
		if (u < 0 || u == next)
			continue;
		g = dset_guards_of(&b->set[j], &b->l, 0, what, sizeof(what));
		if (g < 0)
			return fail("%s", dev_error());
		if (g)
			return json_pack("{s:b,s:s,s:i}", "ok", 1, "integrity",
					 what, "slot", b->slot[u]);
		b->user[j] = -1;
	}
	return NULL;
}

static int time_copy(struct bench *b, double *us)
{
	return dev_flush_cache() || dev_timer_start() ||
		dev_copy(b->copy_dst, b->copy_src, b->copy_bytes) ||
		dev_timer_stop(us) || dev_after_call();
}

static json_t *bench_loop(struct bench *b, json_t *req, FILE *out)
{
	int warmup = (int)json_integer_value(json_object_get(req, "warmup"));
	int iters = (int)json_integer_value(json_object_get(req, "iters"));
	double budget = json_number_value(json_object_get(req, "budget_ms"));
	int min_iters = (int)json_integer_value(json_object_get(req, "min_iters"));
	double spent = 0;
	json_t *res = NULL;

	for (int i = 0; i <= b->n_slots; i++)
		b->times[i] = json_array();
	for (int i = 0; i < b->n_slots; i++) {
		b->sets[i] = json_array();
		b->positions[i] = json_array();
		b->user[i] = -1;
	}
	for (int it = 0; it < warmup + iters; it++) {
		int stop = 0, n = b->n_slots;
		/* the timed rounds' schedule starts at its beginning */
		uint64_t r = (uint64_t)(it >= warmup ? it - warmup : it);

		if ((res = hand_over(b, (int64_t)r)))
			return res;
		for (int p = 0; p < n && !stop; p++) {
			int i = round_slot(n, r, p);
			int j = round_set(n, r, i);
			double us = 0;

			b->user[j] = i;
			stop = timed_call(b, i, j, out, &us, &res);
			if (stop < 0)
				return res;
			spent += us / 1e3;
			if (it >= warmup) {
				json_array_append_new(b->times[i], json_real(us));
				json_array_append_new(b->sets[i], json_integer(j));
				json_array_append_new(b->positions[i],
						      json_integer(p));
			}
		}
		if (b->copy_bytes && !stop) {
			double us = 0;

			if (time_copy(b, &us))
				return fail("%s", dev_error());
			if (it >= warmup)
				json_array_append_new(b->times[b->n_slots],
						      json_real(us));
		}
		if (stop || (budget > 0 && spent > budget &&
			     it >= warmup + min_iters &&
			     (r + 1) % (uint64_t)(n * n) == 0))
			break;
	}
	return NULL;
}

/* Guard bands of every set, and the timings. */
static json_t *bench_finish(struct bench *b)
{
	struct strbuf why = STRBUF_INIT;
	json_t *res, *times, *sets, *positions;
	char what[128];

	if ((res = hand_over(b, -1)))
		return res;
	for (int i = 0; i < b->n_slots; i++) {
		int r = guard_verdict(&b->set[i].ws, "workspace", -1, what,
				      sizeof(what));

		if (r < 0)
			return fail("%s", dev_error());
		if (r) {
			res = json_pack("{s:b,s:s,s:i}", "ok", 1, "integrity",
					what, "slot", b->slot[i]);
			return res;
		}
	}
	times = json_object();
	sets = json_object();
	positions = json_object();
	for (int i = 0; i < b->n_slots; i++) {
		char key[16];

		snprintf(key, sizeof(key), "%d", b->slot[i]);
		json_object_set(times, key, b->times[i]);
		json_object_set(sets, key, b->sets[i]);
		json_object_set(positions, key, b->positions[i]);
	}
	if (b->copy_bytes)
		json_object_set(times, "copy", b->times[b->n_slots]);
	res = json_pack("{s:b,s:i,s:o,s:o,s:o,s:I}", "ok", 1, "rc", 0,
			"times", times, "sets", sets, "positions", positions,
			"calls", (json_int_t)b->calls);
	strbuf_release(&why);
	return res;
}

static json_t *req_bench(json_t *req, FILE *out)
{
	struct bench *b = xcalloc(1, sizeof(*b));
	struct strbuf why = STRBUF_INIT;
	json_t *res;
	long long t0 = now_ns(), t1 = 0, t2 = 0;

	if (bench_prepare(b, req, &why)) {
		res = fail("%s", why.buf);
	} else {
		t1 = now_ns();
		res = bench_loop(b, req, out);
		t2 = now_ns();
		if (!res)
			res = bench_finish(b);
	}
	trace("runner", "bench: set up %.2f ms, %llu calls %.2f ms, checks "
	      "%.2f ms", t1 ? (t1 - t0) / 1e6 : 0,
	      (unsigned long long)b->calls, t2 ? (t2 - t1) / 1e6 : 0,
	      t2 ? ms_since(t2) : 0);
	for (int i = 0; i < MAX_SLOTS; i++)
		dset_free(&b->set[i]);
	if (b->copy_src)
		dev_free(b->copy_src);
	if (b->copy_dst)
		dev_free(b->copy_dst);
	for (int i = 0; i <= MAX_SLOTS; i++)
		json_decref(b->times[i]);
	for (int i = 0; i < MAX_SLOTS; i++) {
		json_decref(b->sets[i]);
		json_decref(b->positions[i]);
	}
	free(b->line);
	free(b);
	strbuf_release(&why);
	return res;
}

/* The benchmark's generator on the device, its bytes back in the
 * mapping: the parent checks the device and the host agree. */
static json_t *req_gen(json_t *req)
{
	struct layout l;
	struct dset s;
	struct ak_gen gen[MAX_TENSORS];
	uint64_t seed = (uint64_t)json_integer_value(json_object_get(req,
								 "seed"));
	json_t *res = NULL;

	memset(&s, 0, sizeof(s));
	if (parse_layout(req, &l) || parse_gens(req, &l, gen))
		return fail("bad tensor layout in request");
	if (dset_inputs(&s, &l))
		res = fail("%s", dev_error());
	for (int t = 0; !res && t < l.n_in; t++)
		if (dev_generate(s.in[t].data, l.in[t].dtype,
				 ak_numel(&l.in[t]), &gen[t], seed, t) ||
		    dev_sync() ||
		    dev_d2h(shm + l.in_off[t], s.in[t].data,
			    tensor_bytes(&l.in[t])))
			res = fail("%s", dev_error());
	dset_free(&s);
	return res ? res : json_pack("{s:b}", "ok", 1);
}

static json_t *req_ceilings(void)
{
	json_t *out = json_object();

	if (dev_ceilings(out)) {
		json_decref(out);
		return fail("%s", dev_error());
	}
	json_object_set_new(out, "ok", json_true());
	return out;
}

static json_t *dispatch(json_t *req, FILE *out)
{
	const char *what = json_string_value(json_object_get(req, "req"));

	if (!what)
		return fail("request without 'req'");
	if (!strcmp(what, "hello"))
		return req_hello();
	if (!device_info)
		return fail("%s", init_error);
	if (!strcmp(what, "load"))
		return req_load(req);
	if (!strcmp(what, "call"))
		return req_call(req);
	if (!strcmp(what, "bench"))
		return req_bench(req, out);
	if (!strcmp(what, "gen"))
		return req_gen(req);
	if (!strcmp(what, "ceilings"))
		return req_ceilings();
	return fail("unknown request '%s'", what);
}

int main(void)
{
	char *line = NULL;
	size_t cap = 0;

	/* Our stdout is the protocol: kernels' printf goes to stderr. */
	int proto = dup(1);
	FILE *out;

	/* A hung kernel must not outlive the tool that started it. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getenv("AK_RUNNER_STDERR")) {
		int fd = open(getenv("AK_RUNNER_STDERR"),
			      O_WRONLY | O_APPEND | O_CLOEXEC);

		if (fd >= 0) {
			dup2(fd, 2);
			close(fd);
		}
	}
	dup2(2, 1);
	out = fdopen(proto, "w");
	if (!out)
		return 3;
	device_info = json_object();
	if (dev_init(device_info)) {
		snprintf(init_error, sizeof(init_error), "%s", dev_error());
		json_decref(device_info);
		device_info = NULL;
	} else {
		json_object_set_new(device_info, "ok", json_true());
		json_object_set_new(device_info, "backend",
				    json_string(dev_backend));
		json_object_set_new(device_info, "abi",
				    json_integer(AK_ABI_VERSION));
	}
	while (getline(&line, &cap, stdin) > 0) {
		json_error_t jerr;
		json_t *req = json_loads(line, 0, &jerr), *res;
		int fatal;

		res = req ? dispatch(req, out) : fail("bad request: %s", jerr.text);
		fatal = json_is_true(json_object_get(res, "fatal"));
		json_dumpf(res, out, JSON_COMPACT);
		fputc('\n', out);
		fflush(out);
		json_decref(req);
		json_decref(res);
		if (fatal)
			return 4;
	}
	free(line);
	return 0;
}
