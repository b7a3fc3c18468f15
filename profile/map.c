/*
 * map.c: which of the nine ops a GPU kernel belongs to, from its
 * name and from the CPU ops and scopes that launched it, and the op's
 * shape from the CPU op's recorded input sizes.  doc/profile.md lists the
 * rules; they err toward "not covered": a share wrongly claimed by an op
 * would send the search after time it cannot win.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include "profile/profile.h"
#include "lib/strbuf.h"

int prof_op_index(const char *name)
{
	for (int i = 0; ops[i]; i++)
		if (!strcmp(ops[i]->name, name))
			return i;
	return -1;
}

static void lower(char *buf, size_t len, const char *s)
{
	size_t i;

	for (i = 0; s[i] && i + 1 < len; i++)
		buf[i] = (char)tolower((unsigned char)s[i]);
	buf[i] = '\0';
}

static int has(const char *l, const char *s)
{
	return strstr(l, s) != NULL;
}

/* w in l, neither preceded nor followed by a letter or digit */
static int has_word(const char *l, const char *w)
{
	size_t n = strlen(w);

	for (const char *p = strstr(l, w); p; p = strstr(p + 1, w))
		if ((p == l || !isalnum((unsigned char)p[-1])) &&
		    !isalnum((unsigned char)p[n]))
			return 1;
	return 0;
}

static int name_backward(const char *l)
{
	return has(l, "backward") || has(l, "bwd") || has(l, "_grad") ||
	       has(l, "grad_");
}

static int name_gemm(const char *l)
{
	return has(l, "gemm") || has(l, "cublas") || has(l, "cutlass") ||
	       has(l, "xmma") || has(l, "nvjet") || has(l, "splitkreduce") ||
	       has(l, "matmul");
}

/* Inductor's names list the fused aten ops: triton_red_fused_mean_pow_.. */
static int triton_op(const char *l)
{
	if (!starts_with(l, "triton"))
		return -1;
	if (has_word(l, "rsqrt") || has(l, "_rsqrt")) {
		if (has(l, "var_mean") || has_word(l, "sub") || has(l, "_sub_"))
			return prof_op_index("layernorm");
		if (has(l, "mean") || has(l, "pow"))
			return prof_op_index("rmsnorm");
	}
	if (has_word(l, "mm") || has_word(l, "bmm") || has_word(l, "addmm") ||
	    has(l, "_mm_") || has(l, "_bmm_") || has(l, "_addmm_"))
		return prof_op_index("matmul");
	if (has_word(l, "sum") || has(l, "_sum_"))
		return prof_op_index("reduce");
	return -1;
}

static void name_dtype(const char *l, enum ak_dtype *dt, int *known)
{
	*known = 1;
	if (has(l, "bfloat16") || has(l, "bf16"))
		*dt = AK_BF16;
	else if (has(l, "half") || has(l, "f16"))
		*dt = AK_F16;
	else if (has(l, "float") || has(l, "f32"))
		*dt = AK_F32;
	else
		*known = 0;
}

/* w in l: "a|b|~c", ~ for a whole word */
static int has_any(const char *l, const char *words)
{
	char w[64];

	for (const char *p = words; *p; ) {
		size_t len = strcspn(p, "|");
		int word = *p == '~';

		snprintf(w, sizeof(w), "%.*s", (int)(len - word), p + word);
		if (word ? has_word(l, w) : has(l, w))
			return 1;
		p += len + (p[len] == '|');
	}
	return 0;
}

/*
 * A kernel's name, in this order: the first rule that matches names its
 * op (NULL: none).  A log-softmax is cross-entropy's first half, not the
 * softmax op: it counts where an nll_loss follows (profile-cupti.c) or
 * its CPU op says so.
 */
static const struct {
	const char *words, *op;
} kernel_rules[] = {
	{ "flash|fmha|attention|sdpa|attn", "flash_attention" },
	{ "cross_entropy|crossentropy|nll_loss", "cross_entropy" },
	{ "rms_norm|rmsnorm", "rmsnorm" },
	{ "layer_norm|layernorm", "layernorm" },
	{ "rotary|~rope", "rotary_embedding" },
	{ "logsoftmax|log_softmax", NULL },
	{ "softmax", "softmax" },
};

int prof_map_kernel(const char *name, enum ak_dtype *dt, int *dt_known)
{
	char l[1024];
	int t;

	lower(l, sizeof(l), name);
	name_dtype(l, dt, dt_known);
	/* a gemm is a gemm in either pass; nothing else of a backward is */
	if (name_backward(l))
		return name_gemm(l) ? prof_op_index("matmul") : -1;
	for (size_t i = 0; i < ARRAY_SIZE(kernel_rules); i++)
		if (has_any(l, kernel_rules[i].words))
			return kernel_rules[i].op ?
			       prof_op_index(kernel_rules[i].op) : -1;
	if (name_gemm(l))
		return prof_op_index("matmul");
	if ((t = triton_op(l)) >= 0)
		return t;
	if (has(l, "reduce") && (has(l, "sum") || has(l, "mean")))
		return prof_op_index("reduce");
	return -1;
}

int prof_is_log_softmax(const char *name)
{
	char l[1024];

	lower(l, sizeof(l), name);
	return has_any(l, "logsoftmax|log_softmax");
}

void prof_short_name(char *buf, size_t len, const char *name)
{
	const char *p = name, *end;
	int depth = 0;

	if (starts_with(p, "void "))
		p += 5;
	/* the parameter list: the first '(' outside template brackets */
	for (end = p; *end; end++) {
		if (*end == '<')
			depth++;
		else if (*end == '>' && depth)
			depth--;
		else if (*end == '(' && !depth && end != p &&
			 strncmp(end, "(anonymous", 10))
			break;
	}
	snprintf(buf, len, "%.*s", (int)(end - p), p);
	if (strlen(buf) > 60)
		strcpy(buf + 57, "...");
}

/* The exact aten ops, by name without "aten::". */
static const struct {
	const char *name, *op;
} aten_ops[] = {
	{ "mm", "matmul" }, { "addmm", "matmul" }, { "bmm", "matmul" },
	{ "baddbmm", "matmul" }, { "addbmm", "matmul" },
	{ "matmul", "matmul" }, { "linear", "matmul" },
	{ "_scaled_mm", "matmul" }, { "mv", "matmul" }, { "addmv", "matmul" },
	{ "softmax", "softmax" }, { "_softmax", "softmax" },
	{ "_safe_softmax", "softmax" },
	{ "layer_norm", "layernorm" }, { "native_layer_norm", "layernorm" },
	{ "rms_norm", "rmsnorm" }, { "_fused_rms_norm", "rmsnorm" },
	{ "scaled_dot_product_attention", "flash_attention" },
	{ "_scaled_dot_product_flash_attention", "flash_attention" },
	{ "_scaled_dot_product_efficient_attention", "flash_attention" },
	{ "_scaled_dot_product_cudnn_attention", "flash_attention" },
	{ "_flash_attention_forward", "flash_attention" },
	{ "_efficient_attention_forward", "flash_attention" },
	{ "_cudnn_attention_forward", "flash_attention" },
	{ "cross_entropy_loss", "cross_entropy" },
	{ "nll_loss", "cross_entropy" }, { "nll_loss_nd", "cross_entropy" },
	{ "nll_loss2d", "cross_entropy" },
	{ "nll_loss_forward", "cross_entropy" },
	{ "sum", "reduce" }, { "mean", "reduce" },
};

static const char *aten_name(const char *name)
{
	return starts_with(name, "aten::") ? name + 6 : NULL;
}

int prof_is_matmul(const char *name)
{
	const char *a = aten_name(name);

	if (!a)
		return 0;
	for (size_t i = 0; i < ARRAY_SIZE(aten_ops); i++)
		if (!strcmp(aten_ops[i].name, a))
			return !strcmp(aten_ops[i].op, "matmul");
	return 0;
}

int prof_is_backward(const char *name)
{
	char l[512];

	lower(l, sizeof(l), name);
	return has(l, "backward");
}

int prof_swiglu_part(const char *name)
{
	const char *a = strstr(name, "::");
	char l[256];
	int part = 0;

	lower(l, sizeof(l), a ? a + 2 : name);
	if (has(l, "silu"))
		part |= 1;
	if (!strcmp(l, "mul") || !strcmp(l, "mul_") || has(l, "silu_and_mul"))
		part |= 2;
	return part;
}

/*
 * The name a scope is known by: the class of "nn.Module: LlamaMLP_0", the
 * function of "model.py(40): apply_rotary_pos_emb" (a file name such as
 * rope_utils.py must not make every function in it a rotary scope), the op
 * of "_C::rms_norm", or the annotation itself.
 */
static void scope_name(char *buf, size_t len, const char *name)
{
	const char *p = name, *q;

	if (starts_with(p, "nn.Module: "))
		p += strlen("nn.Module: ");
	else if ((q = strstr(p, "): ")))
		p = q + 3;
	else if ((q = strrchr(p, ':')) && q > p && q[-1] == ':')
		p = q + 1;
	lower(buf, len, p);
}

/*
 * Scopes (a Python function, an nn.Module, a record_function) and other
 * libraries' ops (flash_attn::, _C::rms_norm), by the name they are known
 * by.  An attention scope names no op: transformers' wrappers hold
 * transposes and copies around the attention op, which maps by itself.
 */
enum { IN_SCOPE = 1, IN_OP = 2 };

static const struct {
	const char *words, *op;
	int where, map;         /* map: the contents decide (PROF_MAP_*) */
} event_rules[] = {
	{ "rmsnorm|rms_norm", "rmsnorm", IN_SCOPE | IN_OP, 0 },
	{ "layernorm|layer_norm", "layernorm", IN_SCOPE | IN_OP, 0 },
	{ "rotary|~rope", NULL, IN_SCOPE | IN_OP, PROF_MAP_ROTARY },
	{ "scaled_dot_product_attention|flash_attn|flash_attention|~sdpa",
	  "flash_attention", IN_OP, 0 },
	{ "cross_entropy|crossentropy", "cross_entropy", IN_SCOPE | IN_OP, 0 },
	{ "mlp|swiglu|feed_forward|feedforward|~ffn", NULL, IN_SCOPE,
	  PROF_MAP_MLP },
};

int prof_map_event(const char *name, int is_op)
{
	const char *a = is_op ? aten_name(name) : NULL;
	int where = is_op ? IN_OP : IN_SCOPE;
	char l[512];

	if (a) {
		for (size_t i = 0; i < ARRAY_SIZE(aten_ops); i++)
			if (!strcmp(aten_ops[i].name, a))
				return prof_op_index(aten_ops[i].op);
		return PROF_MAP_NONE;
	}
	scope_name(l, sizeof(l), name);
	for (size_t i = 0; i < ARRAY_SIZE(event_rules); i++) {
		if (!(event_rules[i].where & where) ||
		    !has_any(l, event_rules[i].words))
			continue;
		return event_rules[i].op ? prof_op_index(event_rules[i].op) :
		       event_rules[i].map;
	}
	return PROF_MAP_NONE;
}

/* Input i's sizes from "Input Dims"; its ndim, or -1. */
static int dims_at(json_t *args, size_t i, int64_t *d, int max)
{
	json_t *a = json_array_get(json_object_get(args, "Input Dims"), i), *v;
	size_t k;

	if (!json_is_array(a) || json_array_size(a) > (size_t)max)
		return -1;
	json_array_foreach(a, k, v) {
		if (!json_is_integer(v) || json_integer_value(v) < 0)
			return -1;
		d[k] = json_integer_value(v);
	}
	return (int)json_array_size(a);
}

static void type_at(json_t *args, size_t i, enum ak_dtype *dt, int *known)
{
	const char *t = json_string_value(json_array_get(
		json_object_get(args, "Input type"), i));

	*known = 1;
	if (t && strstr(t, "BFloat16"))
		*dt = AK_BF16;
	else if (t && strstr(t, "Half"))
		*dt = AK_F16;
	else if (t && !strcmp(t, "float"))
		*dt = AK_F32;
	else
		*known = 0;
}

int prof_input_dims(json_t *args, size_t i, int64_t *d, int max)
{
	return dims_at(args, i, d, max);
}

int prof_input_dtype(json_t *args, size_t i, enum ak_dtype *dt)
{
	int known;

	type_at(args, i, dt, &known);
	return known;
}

static int64_t prod(const int64_t *d, int n)
{
	int64_t p = 1;

	for (int i = 0; i < n; i++)
		p *= d[i];
	return p;
}

/* M, N, K of a matmul-like aten op; 0 or -1. */
static int matmul_dims(const char *name, json_t *args, int64_t *mnk,
		       size_t *first)
{
	const char *a = aten_name(name);
	int64_t x[8], w[8];
	size_t i = 0;
	int nx, nw;

	if (a && (!strcmp(a, "addmm") || !strcmp(a, "baddbmm") ||
		  !strcmp(a, "addbmm") || !strcmp(a, "addmv")))
		i = 1;
	*first = i;
	nx = dims_at(args, i, x, 8);
	nw = dims_at(args, i + 1, w, 8);
	if (nx < 1 || nw < 1)
		return -1;
	mnk[0] = prod(x, nx - 1);
	mnk[2] = x[nx - 1];
	if (a && !strcmp(a, "linear")) {
		if (nw != 2 || w[1] != mnk[2])
			return -1;
		mnk[1] = w[0];
		return 0;
	}
	if (nw == 1) {
		mnk[1] = 1;
		return w[0] == mnk[2] ? 0 : -1;
	}
	mnk[1] = w[nw - 1];
	return w[nw - 2] == mnk[2] ? 0 : -1;
}

/* The first input with ndim dims (0: any), or -1. */
static int input_with(json_t *args, int ndim, int64_t *d, size_t *which)
{
	size_t n = json_array_size(json_object_get(args, "Input Dims"));

	for (size_t i = 0; i < n; i++) {
		int k = dims_at(args, i, d, AK_OP_MAX_DIMS + 4);

		if (k > 0 && (!ndim || k == ndim)) {
			*which = i;
			return k;
		}
	}
	return -1;
}

static int fill_shape(const struct op *op, struct shape *s, const int64_t *d)
{
	s->n = op->n_dims;
	for (int i = 0; i < s->n; i++) {
		if (d[i] <= 0)
			return -1;
		s->d[i] = d[i];
	}
	return op->check_shape && op->check_shape(s) ? -1 : 0;
}

int prof_shape_from_op(int opi, const char *name, json_t *args,
		       struct shape *s, enum ak_dtype *dt, int *dt_known)
{
	const struct op *op = ops[opi];
	int64_t d[AK_OP_MAX_DIMS + 4], v[4];
	size_t which = 0;
	int n;

	*dt_known = 0;
	s->n = 0;
	if (!strcmp(op->name, "matmul") || !strcmp(op->name, "fused_mlp")) {
		/* fused_mlp from its down projection: T=M, D=N, F=K */
		if (!prof_is_matmul(name) || matmul_dims(name, args, v, &which))
			return -1;
		type_at(args, which, dt, dt_known);
		return fill_shape(op, s, v);
	}
	if (!strcmp(op->name, "flash_attention") ||
	    !strcmp(op->name, "rotary_embedding")) {
		n = input_with(args, 4, d, &which);
		if (n < 0 && !strcmp(op->name, "flash_attention") &&
		    input_with(args, 3, d + 1, &which) == 3) {
			d[0] = 1;
			n = 4;
		}
		if (n != 4)
			return -1;
		/* these two take q as [B, S, H, D] */
		if (strstr(name, "_flash_attention_forward") ||
		    strstr(name, "_efficient_attention_forward")) {
			int64_t t = d[1];

			d[1] = d[2];
			d[2] = t;
		}
		type_at(args, which, dt, dt_known);
		return fill_shape(op, s, d);
	}
	/* row ops: rows are every leading dimension, columns the last */
	n = input_with(args, 0, d, &which);
	if (n < 1)
		return -1;
	v[0] = prod(d, n - 1);
	v[1] = d[n - 1];
	type_at(args, which, dt, dt_known);
	return fill_shape(op, s, v);
}
