/*
 * prompt.c: what an agent reads before it edits the kernel, in the order
 * an expert wants it: the task and how it is judged, the ABI and the op's
 * contract, the device, the playbook for the backend, then where the
 * kernel stands, what was tried, what just failed, and the kernel.
 *
 * The fixed part comes first so that a provider's prompt cache can reuse
 * it from one experiment to the next; the llm agent marks its end by the
 * heading "## Where the kernel stands".
 */
#include <stdio.h>
#include <string.h>
#include "agent/agent.h"
#include "ops/dtype.h"
#include "lib/paths.h"
#include "lib/repo.h"

#define HISTORY_SHOWN 40
#define VERDICT_LINES 80
#define DIFF_LINES 200

const char *fence_lang(const char *path)
{
	if (ends_with(path, ".cu") || ends_with(path, ".cuh"))
		return "cuda";
	if (ends_with(path, ".c") || ends_with(path, ".h"))
		return "c";
	return "cpp";
}

static const char *jstr(json_t *j, const char *key)
{
	return json_string_value(json_object_get(j, key));
}

static double jnum(json_t *j, const char *key)
{
	return json_number_value(json_object_get(j, key));
}

/* A fence that the text does not close by accident. */
static const char *fence_for(const char *text)
{
	return strstr(text, "```") ? "~~~~" : "```";
}

static void add_block(struct strbuf *sb, const char *lang, const char *text)
{
	const char *f = fence_for(text);

	strbuf_addf(sb, "%s%s\n%s", f, lang, text);
	if (!ends_with(text, "\n"))
		strbuf_addch(sb, '\n');
	strbuf_addf(sb, "%s\n\n", f);
}

/* ---- the fixed part ---- */

static void add_task(struct strbuf *sb, const struct agent_context *ctx)
{
	const struct problem *p = ctx->p;
	const char *dev = jstr(json_object_get(ctx->device, "device"), "name");

	strbuf_addf(sb, "# Task\n\nMake the %s kernel in %s faster on %s "
		    "(backend %s) without breaking it. Propose one experiment: "
		    "one focused change to that file and a one-line hypothesis "
		    "saying what you changed and why it should be faster. Only "
		    "%s may change; problem.json and everything else are fixed."
		    "\n\n", p->op->name, ctx->kernel_rel, dev ? dev :
		    "this machine", p->backend, ctx->kernel_rel);
}

static void build_line(struct strbuf *sb, const struct agent_context *ctx)
{
	const char *b = ctx->p->backend;
	const char *arch = jstr(json_object_get(ctx->device, "device"), "arch");
	char *conf = NULL;

	if (!strcmp(b, "host")) {
		strbuf_addstr(sb, "cc -std=gnu11 -O3 -march=native -fopenmp "
			      "-shared -fPIC kernel.c -lm");
		return;
	}
	conf = config_string(!strcmp(b, "hip") ? "autokernel.hip.arch" :
			     "autokernel.cuda.arch", NULL);
	if (conf)
		arch = conf;
	if (!strcmp(b, "hip"))
		strbuf_addf(sb, "hipcc -O3 -shared -fPIC -x hip "
			    "--offload-arch=%s kernel.hip", arch ? arch :
			    "gfx90a");
	else
		strbuf_addf(sb, "nvcc -O3 -lineinfo -shared -Xcompiler -fPIC "
			    "-arch=%s kernel.cu", arch ? arch : "sm_90");
	free(conf);
}

static void shape_list(struct strbuf *sb, const struct shape *s, int n)
{
	char buf[128];

	for (int i = 0; i < n; i++) {
		shape_format(&s[i], buf, sizeof(buf));
		strbuf_addf(sb, "%s%s", i ? ", " : "", buf);
	}
}

static void add_judging(struct strbuf *sb, const struct agent_context *ctx)
{
	const struct problem *p = ctx->p;
	char shape[128];
	int any = 0;

	strbuf_addstr(sb, "## How a candidate is judged\n\n1. Built alone, as "
		      "`");
	build_line(sb, ctx);
	strbuf_addstr(sb, "` (plus -I for autokernel.h): one file, no other "
		      "flags or libraries. A compile error rejects it.\n"
		      "2. Verified in five stages, fresh random inputs each, "
		      "every checked element against an fp64 reference:\n"
		      "   1. smoke: ");
	shape_format(&p->smoke, shape, sizeof(shape));
	strbuf_addf(sb, "%s %s;\n   2. shape sweep: every test shape (",
		    shape, dtype_name(p->dtypes[0]));
	shape_list(sb, p->test, p->n_test);
	strbuf_addstr(sb, ") in every dtype (");
	for (int i = 0; i < p->n_dtypes; i++)
		strbuf_addf(sb, "%s%s", i ? ", " : "",
			    dtype_name(p->dtypes[i]));
	strbuf_addstr(sb, ");\n   3. stability:");
	for (int g = GEN_LARGE; g < GEN_KINDS; g++)
		if (p->op->stability & (1u << g))
			strbuf_addf(sb, "%s %s", any++ ? "," : "",
				    gen_name((enum gen_kind)g));
	if (!any)
		strbuf_addstr(sb, " (none for this op)");
	strbuf_addstr(sb, " inputs;\n   4. determinism: three runs must be "
		      "bitwise equal;\n   5. edge shapes: ");
	shape_list(sb, p->edge, p->n_edge);
	strbuf_addstr(sb, ".\n   In every call the outputs are poisoned first "
		      "and must all be written, guard bytes catch writes out "
		      "of bounds, inputs are checksummed, and a constant "
		      "output fails. A hang or crash is a verdict too.\n");
	strbuf_addstr(sb, "3. Timed at the workload's shapes (the model's "
		      "share of the op's time at each): ");
	for (int i = 0; i < p->n_work; i++) {
		shape_format(&p->work[i].s, shape, sizeof(shape));
		strbuf_addf(sb, "%s%s %s weight %.2f", i ? ", " : "", shape,
			    dtype_name(p->work[i].dt), p->work[i].weight);
	}
	strbuf_addf(sb, "; interleaved with the current best (A B A B ...), "
		    "the L2 flushed before every call and the inputs made "
		    "afresh for every call (no two calls see the same data, "
		    "and every call's output is checked on rows chosen after "
		    "it: a kernel that remembers or skips work fails); the "
		    "medians count, weighted. The floor is measured in the "
		    "same run (a copy of the op's minimum traffic, or its "
		    "flops at the measured matrix rate). A time faster than "
		    "the device can move the bytes or do the flops is "
		    "rejected as impossible.\n4. Kept only if it passes, its "
		    "weighted total beats the current best's by more than the "
		    "noise and by at least %.0f%%, and no shape gets slower; "
		    "otherwise it is saved as a rejected attempt and the file "
		    "goes back.\n\n", 100 * config_min_gain());
}

static const char abi_fallback[] =
	"enum ak_dtype { AK_F16, AK_BF16, AK_F32, AK_F64, AK_I32, AK_I64 };\n"
	"\n"
	"struct ak_tensor {\n"
	"\tvoid *data;            /* device memory (host: host memory) */\n"
	"\tenum ak_dtype dtype;\n"
	"\tint ndim;\n"
	"\tint64_t shape[4];\n"
	"\tint64_t stride[4];     /* in elements */\n"
	"};\n"
	"\n"
	"struct ak_args {\n"
	"\tint n_in, n_out;\n"
	"\tconst struct ak_tensor *in;\n"
	"\tstruct ak_tensor *out;  /* allocated by the harness */\n"
	"\tdouble scalar[4];       /* op parameters: eps, scale, ... */\n"
	"\tvoid *stream;           /* cudaStream_t, hipStream_t; NULL */\n"
	"\tvoid *workspace;        /* ak_workspace_size() bytes */\n"
	"\tsize_t workspace_size;\n"
	"};\n"
	"\n"
	"int ak_kernel(const struct ak_args *a);            /* 0: success */\n"
	"size_t ak_workspace_size(const struct ak_args *a); /* optional */\n";

/* The declarations of the installed header, from enum ak_dtype to
 * ak_workspace_size(). */
static void abi_text(struct strbuf *out)
{
	struct strbuf path = STRBUF_INIT, h = STRBUF_INIT;
	const char *from, *to;

	strbuf_addf(&path, "%s/include/autokernel.h", ak_datadir());
	if (strbuf_read_file(&h, path.buf) >= 0 &&
	    (from = strstr(h.buf, "enum ak_dtype")) != NULL &&
	    (to = strstr(from, "ak_workspace_size(const struct ak_args *a);"))
	    != NULL) {
		to += strlen("ak_workspace_size(const struct ak_args *a);");
		strbuf_add(out, from, to - from);
		strbuf_addch(out, '\n');
	} else {
		strbuf_addstr(out, abi_fallback);
	}
	strbuf_release(&path);
	strbuf_release(&h);
}

static void add_abi(struct strbuf *sb, const struct agent_context *ctx)
{
	struct strbuf abi = STRBUF_INIT;
	const char *b = ctx->p->backend;
	int gpu = strcmp(b, "host") != 0;
	const char *stream = !strcmp(b, "hip") ? "hipStream_t" : "cudaStream_t";

	abi_text(&abi);
	strbuf_addstr(sb, "## The kernel ABI (include/autokernel.h)\n\n");
	add_block(sb, "c", abi.buf);
	strbuf_addf(sb, "- `#include \"autokernel.h\"` and define %s. "
		    "Tensors are dense and row-major: the last dimension is "
		    "contiguous, strides are in elements.\n", gpu ?
		    "`extern \"C\" int ak_kernel(const struct ak_args *a)`" :
		    "`int ak_kernel(const struct ak_args *a)`");
	if (gpu)
		strbuf_addf(sb, "- Launch all work on `(%s)a->stream` and "
			    "return 0 without synchronizing: the harness "
			    "synchronizes and times everything queued. Check "
			    "the launch (e.g. %sGetLastError()) and return "
			    "non-zero only for a case the kernel cannot run "
			    "(that fails verification).\n", stream,
			    !strcmp(b, "hip") ? "hip" : "cuda");
	else
		strbuf_addstr(sb, "- The call does the work and returns 0 "
			      "(OpenMP is available; the harness times the "
			      "call).\n");
	strbuf_addstr(sb, "- One kernel file serves every dtype the problem "
		      "lists: dispatch on `a->in[0].dtype` and accumulate in "
		      "f32 (or wider) whatever the storage type; round once to "
		      "the output type at the end.\n"
		      "- Scratch memory: define ak_workspace_size() and use "
		      "`a->workspace`; never allocate device memory, never "
		      "call vendor math libraries (cuBLAS, cuDNN, rocBLAS, "
		      "MKL, ...).\n"
		      "- Never write the inputs or past the outputs. Keep no "
		      "state between calls: one process calls the kernel on "
		      "many shapes and dtypes.\n"
		      "- Bitwise deterministic: no floating-point atomics or "
		      "any reduction whose order changes from run to run.\n\n");
	strbuf_release(&abi);
}

/* The op's row of doc/ops.md: its exact contract, in words. */
static int ops_md_row(struct strbuf *sb, const char *op)
{
	struct strbuf path = STRBUF_INIT, md = STRBUF_INIT, key = STRBUF_INIT;
	static const char *const cols[] = { "shape", "inputs", "output",
					    "scalars" };
	const char *row, *p;
	int ret = 0;

	strbuf_addf(&path, "%s/doc/ops.md", ak_datadir());
	strbuf_addf(&key, "\n| %s |", op);
	if (strbuf_read_file(&md, path.buf) < 0 ||
	    !(row = strstr(md.buf, key.buf)))
		goto cleanup;
	p = row + key.len;
	for (int c = 0; c < 4 && *p && *p != '\n'; c++) {
		const char *end = strchrnul(p, '|');
		const char *nl = strchrnul(p, '\n');
		struct strbuf cell = STRBUF_INIT;

		if (end > nl)
			end = nl;
		strbuf_add(&cell, p, end - p);
		strbuf_trim(&cell);
		if (cell.len)
			strbuf_addf(sb, "- %s: %s\n", cols[c], cell.buf);
		strbuf_release(&cell);
		p = *end == '|' ? end + 1 : end;
	}
	ret = 1;
cleanup:
	strbuf_release(&path);
	strbuf_release(&md);
	strbuf_release(&key);
	return ret;
}

static void add_contract(struct strbuf *sb, const struct problem *p)
{
	const struct op *op = p->op;
	static const char *const names[] = { "f16", "bf16", "f32" };

	strbuf_addf(sb, "## The op: %s (%s)\n\n", op->name, op->summary);
	if (!ops_md_row(sb, op->name)) {
		strbuf_addf(sb, "- shape: %s\n- inputs:", op->dims);
		for (int i = 0; i < op->n_in; i++)
			strbuf_addf(sb, " %s%s", op->in_desc[i],
				    i + 1 < op->n_in ? "," : "");
		strbuf_addf(sb, "\n- output: %s\n", op->out_desc);
		if (op->scalar_desc)
			strbuf_addf(sb, "- scalars: %s\n", op->scalar_desc);
	}
	if (problem_layout(p))
		strbuf_addf(sb, "- layout: %s (this problem's; the kernel gets "
			    "it as scalar[0] = %g)\n", problem_layout(p),
			    p->scalar[0]);
	strbuf_addstr(sb, "- dtypes:");
	for (int i = 0; i < p->n_dtypes; i++)
		strbuf_addf(sb, " %s", dtype_name(p->dtypes[i]));
	strbuf_addstr(sb, " (the first is benchmarked; all are verified)\n"
		      "- tolerance, |out - ref| <= atol * scale + "
		      "rtol * |ref|:");
	for (int i = 0; i < 3; i++)
		strbuf_addf(sb, "%s %s atol %g rtol %g", i ? ";" : "",
			    names[i], p->tol[i].atol, p->tol[i].rtol);
	strbuf_addf(sb, ". %s\n\n", op->tol_why);
}

static void add_device(struct strbuf *sb, const struct agent_context *ctx)
{
	json_t *c = ctx->device, *d = json_object_get(c, "device");
	json_t *m = json_object_get(c, "matrix_tflops");

	strbuf_addstr(sb, "## The device\n\n");
	if (!c) {
		strbuf_addf(sb, "Backend %s; its ceilings were not "
			    "measured.\n\n", ctx->p->backend);
		return;
	}
	strbuf_addf(sb, "%s", jstr(d, "name") ? jstr(d, "name") : "unknown");
	if (jstr(d, "arch"))
		strbuf_addf(sb, ", %s", jstr(d, "arch"));
	if (jnum(d, "sms") > 0)
		strbuf_addf(sb, ", %.0f SMs", jnum(d, "sms"));
	if (jnum(d, "warp_size") > 0)
		strbuf_addf(sb, ", warp %.0f", jnum(d, "warp_size"));
	if (jnum(d, "cores") > 0)
		strbuf_addf(sb, ", %.0f threads", jnum(d, "cores"));
	if (jnum(d, "l2_bytes") > 0)
		strbuf_addf(sb, ", L2 %.0f MiB", jnum(d, "l2_bytes") / 1048576);
	if (jnum(d, "cache_bytes") > 0)
		strbuf_addf(sb, ", cache %.0f MiB",
			    jnum(d, "cache_bytes") / 1048576);
	if (jnum(d, "memory_bytes") > 0)
		strbuf_addf(sb, ", %.0f GiB memory",
			    jnum(d, "memory_bytes") / 1073741824.0);
	strbuf_addstr(sb, ".\nMeasured ceilings: copy");
	strbuf_addf(sb, " %.0f GB/s (bytes read + written)",
		    jnum(c, "copy_gbps"));
	if (jnum(m, "f16") > 0 || jnum(m, "f32") > 0)
		strbuf_addf(sb, "; matrix rate f16 %.1f, bf16 %.1f, f32 %.1f "
			    "TFLOP/s", jnum(m, "f16"), jnum(m, "bf16"),
			    jnum(m, "f32"));
	strbuf_addstr(sb, ". A launch of the bench shape's size reaches less "
		      "than these (ramp and tail): the floor below is measured "
		      "at that size.\n\n");
}

static void add_playbook(struct strbuf *sb, const struct agent_context *ctx)
{
	struct strbuf path = STRBUF_INIT, text = STRBUF_INIT;
	const char *p;

	strbuf_addf(&path, "%s/doc/playbook-%s.md", ak_datadir(),
		    ctx->p->backend);
	if (strbuf_read_file(&text, path.buf) <= 0)
		goto cleanup;
	strbuf_trim(&text);
	p = text.buf;
	/* our title instead of the file's, its sections one level down */
	if (starts_with(p, "# "))
		p = strchrnul(p, '\n');
	while (*p == '\n')
		p++;
	strbuf_addf(sb, "## Playbook (%s)\n\n", ctx->p->backend);
	while (*p) {
		const char *eol = strchrnul(p, '\n');

		if (starts_with(p, "## "))
			strbuf_addch(sb, '#');
		strbuf_add(sb, p, eol - p);
		strbuf_addch(sb, '\n');
		p = *eol ? eol + 1 : eol;
	}
	strbuf_addch(sb, '\n');
cleanup:
	strbuf_release(&path);
	strbuf_release(&text);
}

/* ---- the branch's state ---- */

/* With several shapes, each one's time, weight and share of its floor. */
static void add_shapes(struct strbuf *sb, const struct result *res)
{
	if (res->nr_shapes < 2)
		return;
	strbuf_addstr(sb, "By shape (the first is the one above):\n");
	for (size_t i = 0; i < res->nr_shapes; i++) {
		const struct result_shape *sh = &res->shapes[i];
		char words[64];

		strbuf_addf(sb, "- %s %s, weight %.2f: %.2f us, floor %.2f us "
			    "(%s)\n", sh->shape, sh->dtype, sh->weight,
			    sh->median_us, sh->floor_us, result_floor_words(
			    sh->roofline, "it", words, sizeof(words)));
	}
}

/*
 * The current best is history_current(), the newest kept commit with a
 * note, not history_best(): the candidate is the tip's kernel edited and
 * is judged against the tip, so the tip's time is the one to beat (an
 * older, faster commit's would be the wrong bar).
 */
static void add_standing(struct strbuf *sb, const struct agent_context *ctx)
{
	static const struct result none = RESULT_INIT;
	const struct experiment *e = history_current(ctx->h);
	const struct result *res = e ? &e->result : &none;
	const struct result_bench *b = &res->bench;
	double t = res->time_us, roof = res->roofline;
	double gain = config_min_gain();
	const int matrix = b->floor_kind && !strcmp(b->floor_kind, "matrix");

	strbuf_addstr(sb, "## Where the kernel stands\n\n");
	if (!e || t <= 0) {
		strbuf_addstr(sb, "No measurement yet.\n\n");
		return;
	}
	strbuf_addf(sb, "Current best (%.7s, \"%s\"): %.2f us ",
		    git_oid_tostr_s(&e->id), e->subject, t);
	if (res->nr_shapes > 1)
		strbuf_addstr(sb, "weighted over the workload's shapes");
	else
		strbuf_addf(sb, "at %s %s", b->shape, b->dtype);
	if (ctx->h->baseline_us > 0)
		strbuf_addf(sb, "; the baseline took %.2f us (%.2fx)",
			    ctx->h->baseline_us, ctx->h->baseline_us / t);
	strbuf_addf(sb, ".\nFloor: %.2f us (%s), ", b->floor_us, matrix ?
		    "its flops at the measured matrix rate: compute-bound" :
		    "a device copy of its minimum traffic: memory-bound");
	if (roof > 1)
		strbuf_addf(sb, "which the kernel beats by %.2fx (%s), so it "
			    "bounds nothing here; ", roof, matrix ?
			    "the matrix rate is a measured one, not the peak" :
			    "a copy this small is mostly its ramp");
	else
		strbuf_addf(sb, "so the kernel runs at %.0f%% of the speed of "
			    "light; ", 100 * roof);
	add_shapes(sb, res);
	if (ctx->p->op->compute_bound && b->flops > 0)
		strbuf_addf(sb, "it does %.3g GFLOP, %.1f TFLOP/s achieved.\n",
			    b->flops / 1e9, b->flops / t / 1e6);
	else if (b->bytes > 0)
		strbuf_addf(sb, "it moves %.3g MB at least, %.3g GB/s "
			    "achieved.\n", b->bytes / 1e6, b->bytes / t / 1e3);
	else
		strbuf_addch(sb, '\n');
	strbuf_addf(sb, "To be kept a candidate must run in under about "
		    "%.2f us (%.0f%% faster) and beat the noise.\n",
		    t / (1 + gain), 100 * gain);
	if (roof >= 0.9)
		strbuf_addstr(sb, "It is close to the floor: what is left is "
			      "small (launch shape, a pass or a conversion too "
			      "many, tail effects); a rewrite is unlikely to "
			      "pay.\n");
	else if (roof > 0 && roof < 0.5)
		strbuf_addf(sb, "It is far from the floor: the structure (%s) "
			    "matters more than tuning.\n",
			    !strcmp(ctx->p->backend, "host") ?
			    "passes over memory, vectorization, threading" :
			    ctx->p->op->compute_bound ? "tiling, data reuse, "
			    "tensor cores, pipelining" : "passes over memory, "
			    "access width, bytes in flight, parallelism");
	strbuf_addch(sb, '\n');
}

static void first_line(struct strbuf *sb, const char *s, size_t max)
{
	size_t n = s ? strcspn(s, "\n") : 0;

	if (n > max) {
		strbuf_add(sb, s, max - 3);
		strbuf_addstr(sb, "...");
	} else if (n) {
		strbuf_add(sb, s, n);
	}
}

/* The build's scratch directory in compiler messages, "/repo/.git/
 * autokernel/tmp-Ab12Cd/softmax/kernel.c:12", made "softmax/kernel.c:12". */
static void strip_scratch_paths(struct strbuf *sb)
{
	char *p;

	while ((p = strstr(sb->buf, "autokernel/tmp-")) != NULL) {
		char *start = p, *end = strchr(p + 15, '/');

		if (!end)
			break;
		while (start > sb->buf && !strchr(" \t\n'\"(", start[-1]))
			start--;
		memmove(start, end + 1, sb->buf + sb->len - end);
		strbuf_setlen(sb, sb->len - (end + 1 - start));
	}
}

/* One line that says why an attempt failed: for a build, the compiler's
 * first error rather than "cc exited with 1". */
static void verdict_line(struct strbuf *sb, const char *verdict, size_t max)
{
	struct strbuf v = STRBUF_INIT;
	const char *line, *err;

	strbuf_addstr(&v, verdict);
	strip_scratch_paths(&v);
	line = v.buf;
	err = starts_with(v.buf, "unable to build") ?
		strstr(v.buf, "error") : NULL;
	if (err) {
		while (err > v.buf && err[-1] != '\n')
			err--;
		line = err;
	}
	first_line(sb, line, max);
	strbuf_release(&v);
}


static void add_history(struct strbuf *sb, const struct agent_context *ctx)
{
	const struct history *h = ctx->h;
	size_t from = h->nr > HISTORY_SHOWN ? h->nr - HISTORY_SHOWN : 0;
	int kept = 0, rejected = 0;

	for (size_t i = 0; i < h->nr; i++) {
		if (h->e[i].attempt)
			rejected++;
		else if (i)
			kept++;
	}
	strbuf_addf(sb, "## History (%zu experiments after the baseline: %d "
		    "kept, %d rejected; oldest first)\n\nLearn from it: do not "
		    "try a rejected idea again unless you fix why it failed.\n",
		    h->nr ? h->nr - 1 : 0, kept, rejected);
	if (from)
		strbuf_addf(sb, "(%zu older experiments not shown)\n", from);
	for (size_t i = from; i < h->nr; i++) {
		const struct experiment *e = &h->e[i];
		const struct result *res = &e->result;
		const char *reason = experiment_reason(e);

		strbuf_addf(sb, "- #%zu ", i);
		if (e->attempt)
			strbuf_addf(sb, "rejected (%s)", *reason ? reason : "?");
		else
			strbuf_addf(sb, "%s %.7s", e->status,
				    git_oid_tostr_s(&e->id));
		strbuf_addf(sb, ": %s", e->subject);
		if (res->time_us > 0)
			strbuf_addf(sb, " | %.2f us, %.0f%% of floor",
				    res->time_us, 100 * res->roofline);
		if (e->attempt) {
			strbuf_addstr(sb, " | ");
			verdict_line(sb, res->verdict ? res->verdict :
				     "no verdict", 240);
		}
		strbuf_addch(sb, '\n');
	}
	strbuf_addch(sb, '\n');
}

/* The change an attempt made to the kernel, as a patch. */
static void attempt_diff(struct strbuf *out, const struct experiment *e,
			 const char *kernel_rel)
{
	git_commit *c = NULL, *parent = NULL;
	git_tree *t = NULL, *pt = NULL;
	git_diff *diff = NULL;
	git_buf buf = { 0 };
	git_diff_options opts;
	char *paths[] = { (char *)kernel_rel };

	git_diff_options_init(&opts, GIT_DIFF_OPTIONS_VERSION);
	opts.pathspec.strings = paths;
	opts.pathspec.count = 1;
	if (git_commit_lookup(&c, repo_need(), &e->id) < 0 ||
	    git_commit_parent(&parent, c, 0) < 0 ||
	    git_commit_tree(&t, c) < 0 || git_commit_tree(&pt, parent) < 0 ||
	    git_diff_tree_to_tree(&diff, repo_need(), pt, t, &opts) < 0 ||
	    git_diff_to_buf(&buf, diff, GIT_DIFF_FORMAT_PATCH) < 0)
		goto cleanup;
	if (buf.ptr)
		strbuf_add_head_lines(out, buf.ptr, DIFF_LINES);
	if (buf.ptr && out->len < buf.size)
		strbuf_addstr(out, "... (diff cut)\n");
cleanup:
	git_buf_dispose(&buf);
	git_diff_free(diff);
	git_tree_free(t);
	git_tree_free(pt);
	git_commit_free(parent);
	git_commit_free(c);
}

static void add_last_failure(struct strbuf *sb, const struct agent_context *ctx)
{
	const struct history *h = ctx->h;
	const struct experiment *e = h->nr ? &h->e[h->nr - 1] : NULL;
	struct strbuf v = STRBUF_INIT, diff = STRBUF_INIT;
	const char *reason, *verdict;
	double t, ratio;

	if (!e || !e->attempt)
		return;
	reason = experiment_reason(e);
	verdict = e->result.verdict;
	strbuf_addf(sb, "## The last experiment (#%zu) was rejected\n\n"
		    "Hypothesis: %s\nReason: %s\n", h->nr - 1, e->subject,
		    *reason ? reason : "unknown");
	/* the figure that decided: the best's median over the candidate's,
	 * timed interleaved in the same run */
	t = e->result.time_us;
	ratio = experiment_head_ratio(e);
	if ((!strcmp(reason, "slower") || !strcmp(reason, "noise")) &&
	    t > 0 && ratio > 0)
		strbuf_addf(sb, "It ran %.2f us against %.2f us for the "
			    "best, timed interleaved.\n", t, t * ratio);
	if (verdict) {
		strbuf_add_head_lines(&v, verdict, VERDICT_LINES);
		strip_scratch_paths(&v);
		strbuf_addstr(sb, "The full verdict:\n\n");
		add_block(sb, "text", v.buf);
	}
	attempt_diff(&diff, e, ctx->kernel_rel);
	if (diff.len) {
		strbuf_addstr(sb, "Its change against the current kernel "
			      "(line numbers in the verdict are the "
			      "candidate's):\n\n");
		add_block(sb, "diff", diff.buf);
	}
	strbuf_release(&v);
	strbuf_release(&diff);
}

static void add_kernel(struct strbuf *sb, const struct agent_context *ctx)
{
	struct strbuf text = STRBUF_INIT;
	const struct experiment *e = history_current(ctx->h);

	if (strbuf_read_file(&text, ctx->kernel_path) < 0)
		return;
	strbuf_addf(sb, "## The current kernel: %s", ctx->kernel_rel);
	if (e && e->result.time_us > 0)
		strbuf_addf(sb, " (the best so far, %.2f us)",
			    e->result.time_us);
	strbuf_addstr(sb, "\n\n");
	add_block(sb, fence_lang(ctx->kernel_rel), text.buf);
	strbuf_release(&text);
}

void prompt_build(struct strbuf *sb, const struct agent_context *ctx,
		  int with_kernel)
{
	add_task(sb, ctx);
	add_judging(sb, ctx);
	add_abi(sb, ctx);
	add_contract(sb, ctx->p);
	add_device(sb, ctx);
	add_playbook(sb, ctx);
	add_standing(sb, ctx);
	add_history(sb, ctx);
	add_last_failure(sb, ctx);
	if (with_kernel)
		add_kernel(sb, ctx);
}

int prompt_write(const struct agent_context *ctx)
{
	struct strbuf sb = STRBUF_INIT;
	int ret;

	prompt_build(&sb, ctx, 1);
	strbuf_addf(&sb, "# How to deliver\n\nEdit %s in place (%s): nothing "
		    "else may change. Write your one-line hypothesis to the "
		    "file named by $AUTOKERNEL_MESSAGE. You may compile the "
		    "file to check it; do not commit: the loop commits it and "
		    "the hooks judge it.\n", ctx->kernel_rel, ctx->kernel_path);
	ret = write_file_atomic(ctx->prompt_path, sb.buf, sb.len);
	strbuf_release(&sb);
	return ret;
}
