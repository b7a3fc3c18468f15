/*
 * pattern.c: the ops as model code writes them out, recognized in the
 * sequence of a thread's top ops (events.h), whether or not the trace has
 * Python scopes to name them.
 *
 * A pattern is a list of steps, each an op name ("mul"), a choice
 * ("div|mul") or a class ("@mm": any matmul op, "@cast": a dtype cast),
 * optional ('?') or repeated ('+').  Between two steps a match may pass
 * over views and other ops that launch nothing (is_free()), casts where
 * the pattern allows them, and the pattern's own fillers (the ops that
 * build a causal mask, say); everything from the first step to the last
 * is the run, one call of the op.  A check on the recorded sizes then
 * accepts or rejects the match and gives the call its shape: a mul, a
 * neg, a cat, a mul and an add are transformers' rotate_half() only if
 * the neg takes half of the mul's last dimension.  Patterns are tried in
 * table order at each op; the first that matches wins and the search goes
 * on after it.
 *
 * Casts at either end of a run join it where the pattern says so (the
 * hidden_states.to(torch.float32) before a written-out RMSNorm): a kernel
 * that does the op in one pass does not do them either.
 */
#include <stdio.h>
#include <string.h>
#include "profile/events.h"
#include "lib/strbuf.h"

#define MAX_STEPS 10
/* top ops a run may pass over between two steps */
#define MAX_GAP 24

enum {
	P_CASTS = 1,            /* casts may lie between the steps */
	P_EDGE_CASTS = 2,       /* and at either end, of the same size */
};

struct pattern {
	const char *op;         /* the op it is, or NULL: glue, named label */
	const char *label;      /* what it is: a comment, or the glue's name */
	const char *steps[MAX_STEPS];
	const char *fill;       /* other ops it may pass over, or NULL */
	int flags;
	int (*check)(const struct trace *t, const int *at, struct run *r);
};

/* Ops that launch nothing, or only a copy that belongs to what follows. */
static const char *const free_ops[] = {
	"view", "reshape", "_reshape_alias", "_unsafe_view", "as_strided",
	"transpose", "t", "permute", "expand", "expand_as", "unsqueeze",
	"squeeze", "slice", "select", "narrow", "split", "split_with_sizes",
	"chunk", "unbind", "alias", "detach", "lift_fresh", "view_as",
	"flatten", "unflatten", "contiguous", "resolve_conj", "resolve_neg",
	"empty", "empty_like", "empty_strided", "dropout", "feature_dropout",
	"lift", "_has_compatible_shallow_copy_type", "result_type",
};

static const char *const cast_ops[] = {
	"to", "_to_copy", "type_as", "copy_",
};

static int in_list(const char *a, const char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(a, list[i]))
			return 1;
	return 0;
}

static int is_free(const char *a)
{
	return in_list(a, free_ops, ARRAY_SIZE(free_ops));
}

static int is_cast(const char *a)
{
	return in_list(a, cast_ops, ARRAY_SIZE(cast_ops));
}

static int token_is(const char *tok, const char *a, const char *full)
{
	if (!strcmp(tok, "@mm"))
		return prof_is_matmul(full);
	if (!strcmp(tok, "@cast"))
		return is_cast(a);
	return !strcmp(tok, a);
}

/* Aten op a (full: its event's name) is one of "mul|div?", "@mm" ... */
static int name_in(const char *a, const char *full, const char *choices)
{
	char tok[64];

	for (const char *p = choices; *p; ) {
		size_t len = strcspn(p, "|");

		snprintf(tok, sizeof(tok), "%.*s", (int)len, p);
		tok[strcspn(tok, "?+")] = '\0';
		if (token_is(tok, a, full))
			return 1;
		p += len + (p[len] == '|');
	}
	return 0;
}

static int step_flag(const char *step, char flag)
{
	return step[strlen(step) - 1] == flag;
}

/* ---- sizes of the matched ops ---- */

static int64_t numel(const int64_t *d, int n)
{
	int64_t p = 1;

	for (int i = 0; i < n; i++)
		p *= d[i];
	return n >= 0 ? p : -1;
}

/* Input i of event e: its ndim (-1: none), sizes into d. */
static int in_dims(const struct trace *t, int e, size_t i, int64_t *d)
{
	return prof_input_dims(t->ev[e].args, i, d, 8);
}

static int64_t in_numel(const struct trace *t, int e, size_t i)
{
	int64_t d[8];

	return numel(d, in_dims(t, e, i, d));
}

/* The model's dtype: a cast's input, else the event's first half type. */
static void run_dtype(const struct trace *t, int e, struct run *r)
{
	enum ak_dtype dt;

	for (size_t i = 0; i < 4; i++)
		if (prof_input_dtype(t->ev[e].args, i, &dt) &&
		    (!r->dt_known || (r->dt == AK_F32 && dt != AK_F32))) {
			r->dt = dt;
			r->dt_known = 1;
		}
}

/* A matmul op's M, N, K; 0 or -1. */
static int mnk(const struct trace *t, int e, int64_t *v)
{
	struct shape s;
	enum ak_dtype dt;
	int known;

	if (prof_shape_from_op(prof_op_index("matmul"), t->ev[e].name,
			       t->ev[e].args, &s, &dt, &known))
		return -1;
	memcpy(v, s.d, 3 * sizeof(*v));
	return 0;
}

static int set_shape(struct run *r, const char *op, const int64_t *d)
{
	const struct op *o = ops[prof_op_index(op)];

	r->shape.n = o->n_dims;
	for (int i = 0; i < o->n_dims; i++) {
		if (d[i] <= 0)
			return -1;
		r->shape.d[i] = d[i];
	}
	if (o->check_shape && o->check_shape(&r->shape))
		return -1;
	r->shape_ok = 1;
	return 0;
}

/* ---- the checks: sizes that agree, and the call's shape ---- */

/* x.pow(2).mean(-1) ...: rows x C of the pow's input */
static int check_rmsnorm(const struct trace *t, const int *at, struct run *r)
{
	int64_t d[8], v[2];
	int n = in_dims(t, at[0], 0, d);

	if (n < 1 || in_numel(t, at[1], 0) != numel(d, n))
		return -1;
	v[0] = numel(d, n - 1);
	v[1] = d[n - 1];
	run_dtype(t, at[6] >= 0 ? at[6] : at[4], r);
	return set_shape(r, "rmsnorm", v);
}

/*
 * x [4-d] times cos (either order), cos broadcast over the heads: S is the
 * last of x's first three dimensions where cos is not 1, H the last where
 * it is, B the other (transformers' [B,H,S,D] with cos [B,1,S,D], Meta's
 * [B,S,H,D] with freqs [1,S,1,D]).
 */
static int rotary_bhsd(const struct trace *t, int mul, int64_t D,
		       struct run *r)
{
	int64_t x[8], c[8], v[4];
	int big = in_numel(t, mul, 1) > in_numel(t, mul, 0);
	int nx = in_dims(t, mul, big, x), nc = in_dims(t, mul, !big, c);
	int s = -1, h = -1, b = -1;

	if (nx != 4 || nc < 2 || nc > 4)
		return -1;
	for (int i = 0; i < 3; i++) {
		int64_t ci = i - (4 - nc) >= 0 ? c[i - (4 - nc)] : 1;

		if (ci == x[i] && ci > 1)
			s = i;
		else if (ci == 1)
			h = i;
		else
			return -1;      /* cos is not broadcast to x */
	}
	for (int i = 0; i < 3 && b < 0; i++)
		if (i != s && i != h)
			b = i;
	if (s < 0 || h < 0 || b < 0)
		return -1;
	v[0] = x[b];
	v[1] = x[h];
	v[2] = x[s];
	v[3] = D;
	return set_shape(r, "rotary_embedding", v);
}

/* x * cos + rotate(x) * sin: the neg takes half of x, the mul all */
static int check_rotary(const struct trace *t, const int *at, struct run *r)
{
	int64_t x = in_numel(t, at[0], 0), d[8];

	if (in_numel(t, at[0], 1) > x)
		x = in_numel(t, at[0], 1);
	if (in_numel(t, at[1], 0) * 2 != x || in_dims(t, at[1], 0, d) != 4 ||
	    (in_numel(t, at[3], 0) != x && in_numel(t, at[3], 1) != x))
		return -1;
	run_dtype(t, at[0], r);
	return rotary_bhsd(t, at[0], 2 * d[3], r);
}

static int check_rotary_half(const struct trace *t, const int *at,
			     struct run *r)
{
	r->layout = ROTARY_HALF;
	return check_rotary(t, at, r);
}

static int check_rotary_pairs(const struct trace *t, const int *at,
			      struct run *r)
{
	r->layout = ROTARY_INTERLEAVED;
	return check_rotary(t, at, r);
}

/* view_as_complex(x.reshape(..., -1, 2)) * freqs_cis: Meta's Llama */
static int check_rotary_complex(const struct trace *t, const int *at,
				struct run *r)
{
	int64_t x[8];
	int n = in_dims(t, at[0], 0, x);

	if (n != 5 || x[4] != 2)
		return -1;
	r->layout = ROTARY_INTERLEAVED;
	run_dtype(t, at[0], r);
	return rotary_bhsd(t, at[1], 2 * x[3], r);
}

/* down(silu(gate(x)) * up(x)): T x D x F from the down projection */
static int swiglu(const struct trace *t, int gate, int up, int silu,
		  int mul, int down, struct run *r)
{
	int64_t g[3], u[3], d[3], v[3];

	if (mnk(t, gate, g) || mnk(t, down, d) || (up >= 0 && mnk(t, up, u)))
		return -1;
	if (up < 0) {                   /* gate and up in one: [T, 2F] */
		if (g[1] != 2 * d[2])
			return -1;
		g[1] = d[2];
	} else if (memcmp(g, u, sizeof(g))) {
		return -1;
	}
	if (g[0] != d[0] || g[2] != d[1] || g[1] != d[2] ||
	    in_numel(t, silu, 0) != g[0] * g[1] ||
	    in_numel(t, mul, 0) != g[0] * g[1])
		return -1;
	v[0] = d[0];
	v[1] = d[1];
	v[2] = d[2];
	run_dtype(t, down, r);
	return set_shape(r, "fused_mlp", v);
}

static int check_swiglu(const struct trace *t, const int *at, struct run *r)
{
	return swiglu(t, at[0], at[2], at[1], at[3], at[4], r);
}

static int check_swiglu_up_first(const struct trace *t, const int *at,
				 struct run *r)
{
	return swiglu(t, at[1], at[0], at[2], at[3], at[4], r);
}

static int check_swiglu_fused(const struct trace *t, const int *at,
			      struct run *r)
{
	return swiglu(t, at[0], -1, at[1], at[2], at[3], r);
}

/* The mask is over [S, S] (causal), not over [1, S] (padding only). */
static int causal_mask(const struct trace *t, int e, int64_t S)
{
	int64_t d[8];
	/* where(mask, scores, min), add(scores, mask), masked_fill(...) */
	size_t i = strcmp(ev_aten(&t->ev[e]), "where") ? 1 : 0;
	int n = in_dims(t, e, i, d);

	return n >= 2 && d[n - 1] == S && d[n - 2] == S;
}

/*
 * softmax(q k^T * scale + causal mask) v, written out (GPT-2's eager
 * attention): the flash_attention op, at q's B x H x S x D.  Without a
 * mask over [S, S] it is not causal, and stays a matmul and a softmax.
 */
static int check_attention(const struct trace *t, const int *at,
			   struct run *r)
{
	int64_t q[8], k[8], p[8], v[8], s[4];
	int nq = in_dims(t, at[0], 0, q), nk = in_dims(t, at[0], 1, k);
	int np = in_dims(t, at[5], 0, p), nv = in_dims(t, at[5], 1, v);

	if (nq < 3 || nq != nk || np != nq || nv != nq || at[2] < 0)
		return -1;
	if (k[nk - 2] != q[nq - 1] || k[nk - 1] != q[nq - 2] ||
	    p[np - 1] != q[nq - 2] || v[nv - 2] != q[nq - 2] ||
	    v[nv - 1] != q[nq - 1] || !causal_mask(t, at[2], q[nq - 2]))
		return -1;
	s[0] = nq == 4 ? q[0] : 1;
	s[1] = nq == 4 ? q[1] : q[0];
	s[2] = q[nq - 2];
	s[3] = q[nq - 1];
	run_dtype(t, at[0], r);
	return set_shape(r, "flash_attention", s);
}

/* N x V: every leading dimension of e's logits is a row */
static int ce_shape(const struct trace *t, int e, struct run *r)
{
	int64_t d[8], v[2];
	int n = in_dims(t, e, 0, d);

	if (n < 1)
		return -1;
	v[0] = numel(d, n - 1);
	v[1] = d[n - 1];
	return set_shape(r, "cross_entropy", v);
}

/* loss(logits.float(), labels): the upcast is the loss's */
static int check_ce_upcast(const struct trace *t, const int *at,
			   struct run *r)
{
	if (in_numel(t, at[0], 0) != in_numel(t, at[1], 0))
		return -1;
	run_dtype(t, at[0], r);
	return ce_shape(t, at[1], r);
}

static int check_ce_parts(const struct trace *t, const int *at,
			  struct run *r)
{
	run_dtype(t, at[0], r);
	return ce_shape(t, at[0], r);
}

static int check_any(const struct trace *t, const int *at, struct run *r)
{
	(void)t;
	(void)at;
	(void)r;
	return 0;
}

#define MASK_OPS "ones|full|zeros|tril|triu|bitwise_not|logical_not|fill_|" \
		 "arange|ge|le|lt|gt|eq|where|scalar_tensor|masked_fill|" \
		 "masked_fill_|mul|div|add|sub"
#define LABEL_OPS "pad|constant_pad_nd|clone|copy_|fill_|ne|to|_to_copy|" \
		  "index|masked_fill|sum"

static const struct pattern patterns[] = {
	{ "rmsnorm", "x * rsqrt(x.pow(2).mean(-1) + eps) * w",
	  { "pow", "mean", "add", "rsqrt", "mul", "add?", "mul?" }, NULL,
	  P_CASTS | P_EDGE_CASTS, check_rmsnorm },
	{ "rotary_embedding", "x * cos + rotate_half(x) * sin",
	  { "mul", "neg", "cat", "mul", "add" }, NULL,
	  P_CASTS | P_EDGE_CASTS, check_rotary_half },
	{ "rotary_embedding", "x * cos + rotate_every_two(x) * sin",
	  { "mul", "neg", "stack", "mul", "add" }, NULL,
	  P_CASTS | P_EDGE_CASTS, check_rotary_pairs },
	{ "rotary_embedding", "view_as_real(view_as_complex(x) * freqs_cis)",
	  { "view_as_complex+", "mul", "view_as_real", "mul?",
	    "view_as_real?" }, "view_as_complex",
	  P_CASTS | P_EDGE_CASTS, check_rotary_complex },
	{ "fused_mlp", "down(silu(gate(x)) * up(x))",
	  { "@mm", "silu", "@mm", "mul", "@mm" }, NULL, 0, check_swiglu },
	{ "fused_mlp", "down(up(x) * silu(gate(x)))",
	  { "@mm", "@mm", "silu", "mul", "@mm" }, NULL, 0,
	  check_swiglu_up_first },
	{ "fused_mlp", "down(silu(gate) * up), gate_up(x).chunk(2)",
	  { "@mm", "silu", "mul", "@mm" }, NULL, 0, check_swiglu_fused },
	{ "flash_attention", "softmax(q k^T * scale + causal mask) v",
	  { "@mm", "mul|div?", "add|where|masked_fill|masked_fill_|add_",
	    "mul|div?", "softmax|_softmax|_safe_softmax", "@mm" }, MASK_OPS,
	  P_CASTS, check_attention },
	{ "cross_entropy", "cross_entropy(logits.float(), labels)",
	  { "@cast", "cross_entropy_loss|nll_loss_nd|nll_loss" }, LABEL_OPS,
	  0, check_ce_upcast },
	{ "cross_entropy", "nll_loss(log_softmax(logits), labels)",
	  { "log_softmax|_log_softmax", "nll_loss_nd|nll_loss" }, NULL,
	  P_CASTS | P_EDGE_CASTS, check_ce_parts },
	{ NULL, "gelu (tanh, written out)",
	  { "mul", "pow", "mul", "add", "mul", "tanh", "add", "mul" }, NULL,
	  0, check_any },
	{ NULL, "gelu (erf, written out)",
	  { "mul", "mul|div", "erf", "add", "mul" }, NULL, 0, check_any },
};

/* ---- matching ---- */

struct match {
	const struct pattern *pt;
	int nr_steps;
	int at[MAX_STEPS];      /* each step's first event, -1: skipped */
	int count[MAX_STEPS];
	size_t first, last;     /* the run in seq */
};

static int nr_steps(const struct pattern *pt)
{
	int n = 0;

	while (n < MAX_STEPS && pt->steps[n])
		n++;
	return n;
}

static const char *seq_aten(const struct trace *t, const int *seq, size_t j)
{
	return ev_aten(&t->ev[seq[j]]);
}

static int may_pass(const struct pattern *pt, const char *a)
{
	return is_free(a) || ((pt->flags & P_CASTS) && is_cast(a)) ||
	       (pt->fill && name_in(a, a, pt->fill));
}

/* The step at or after k that event e is, passing optional steps; -1. */
static int step_of(const struct trace *t, const struct match *m, int k,
		   int e)
{
	const char *a = ev_aten(&t->ev[e]);

	for (; k < m->nr_steps; k++) {
		const char *st = m->pt->steps[k];

		if (a && name_in(a, t->ev[e].name, st))
			return k;
		if (!step_flag(st, '?') && !(step_flag(st, '+') && m->count[k]))
			return -1;
	}
	return -1;
}

static int steps_done(const struct match *m, int k)
{
	for (; k < m->nr_steps; k++) {
		const char *st = m->pt->steps[k];

		if (!step_flag(st, '?') && !(step_flag(st, '+') && m->count[k]))
			return 0;
	}
	return 1;
}

static int match_at(const struct trace *t, const int *seq, size_t n,
		    size_t i, const struct pattern *pt, struct match *m)
{
	int k = 0, gap = 0;

	memset(m, 0, sizeof(*m));
	m->pt = pt;
	m->nr_steps = nr_steps(pt);
	for (int s = 0; s < MAX_STEPS; s++)
		m->at[s] = -1;
	if (step_of(t, m, 0, seq[i]) != 0)
		return -1;
	for (size_t j = i; j < n && gap <= MAX_GAP; j++) {
		const struct ev *v = &t->ev[seq[j]];
		int s;

		if (v->thread != t->ev[seq[i]].thread || v->run >= 0)
			break;
		s = step_of(t, m, k, seq[j]);
		if (s >= 0) {
			if (!m->count[s]++)
				m->at[s] = seq[j];
			k = step_flag(pt->steps[s], '+') ? s : s + 1;
			m->last = j;
			gap = 0;
			if (k >= m->nr_steps)
				break;
			continue;
		}
		if (!seq_aten(t, seq, j) || !may_pass(pt, seq_aten(t, seq, j)))
			break;
		gap++;
	}
	m->first = i;
	return steps_done(m, k) ? 0 : -1;
}

/*
 * A cast next to the run, of its first op's input size, is part of it:
 * before it any (the upcast), after it one from f32 (the cast back), not
 * the next op's upcast.
 */
static int edge_cast(const struct trace *t, const int *seq, size_t j,
		     int64_t size, int after)
{
	const struct ev *v = &t->ev[seq[j]];
	const char *a = ev_aten(v);
	enum ak_dtype dt;

	if (!a || !is_cast(a) || v->run >= 0 || in_numel(t, seq[j], 0) != size)
		return 0;
	return !after || (prof_input_dtype(v->args, 0, &dt) && dt == AK_F32);
}

static void add_edges(const struct trace *t, const int *seq, size_t n,
		      struct match *m)
{
	int64_t size = in_numel(t, seq[m->first], 0);
	uint64_t thread = t->ev[seq[m->first]].thread;
	size_t j;

	for (j = m->first; j > 0 && t->ev[seq[j - 1]].thread == thread; j--) {
		const char *a = seq_aten(t, seq, j - 1);

		if (edge_cast(t, seq, j - 1, size, 0))
			m->first = j - 1;
		else if (!a || !is_free(a))
			break;
	}
	for (j = m->last + 1; j < n && t->ev[seq[j]].thread == thread; j++) {
		const char *a = seq_aten(t, seq, j);

		if (edge_cast(t, seq, j, size, 1))
			m->last = j;
		else if (!a || !is_free(a))
			break;
	}
}

static void add_run(struct trace *t, const int *seq, const struct match *m,
		    const struct run *r)
{
	int idx = (int)t->nr_runs;

	ALLOC_GROW(t->runs, t->nr_runs + 1, t->alloc_runs);
	t->runs[t->nr_runs] = *r;
	t->runs[t->nr_runs].head = seq[m->first];
	t->nr_runs++;
	for (size_t j = m->first; j <= m->last; j++)
		t->ev[seq[j]].run = idx;
}

/* The first pattern that matches at seq[i] and passes its check. */
static int try_patterns(struct trace *t, const int *seq, size_t n, size_t i)
{
	for (size_t p = 0; p < ARRAY_SIZE(patterns); p++) {
		const struct pattern *pt = &patterns[p];
		struct match m;
		struct run r = { -1, pt->label, -1, 0, 0, -1, { 0 }, AK_F16 };

		if (match_at(t, seq, n, i, pt, &m) || pt->check(t, m.at, &r))
			continue;
		r.opi = pt->op ? prof_op_index(pt->op) : -1;
		if (pt->flags & P_EDGE_CASTS) {
			add_edges(t, seq, n, &m);
			/* a leading upcast says what the model computes in */
			run_dtype(t, seq[m.first], &r);
		}
		add_run(t, seq, &m, &r);
		return 1;
	}
	return 0;
}

/* Marks the top ops; their list, by thread and time, into *out. */
static size_t top_ops(struct trace *t, int **out)
{
	int *seq = xcalloc(t->nr_cpu + 1, sizeof(int));
	char *in_op = xcalloc(t->nr + 1, 1);
	size_t n = 0;

	for (size_t i = 0; i < t->nr_cpu; i++) {
		int e = t->cpu[i], up = t->ev[e].parent;
		int inside = up >= 0 && in_op[up];

		in_op[e] = inside || t->ev[e].kind == EV_OP;
		if (t->ev[e].kind == EV_OP && !inside) {
			t->ev[e].top = 1;
			seq[n++] = e;
		}
	}
	free(in_op);
	*out = seq;
	return n;
}

void trace_find_runs(struct trace *t)
{
	int *seq;
	size_t n = top_ops(t, &seq);

	for (size_t i = 0; i < n; i++) {
		if (t->ev[seq[i]].run >= 0 || !ev_aten(&t->ev[seq[i]]))
			continue;
		try_patterns(t, seq, n, i);
	}
	free(seq);
}
