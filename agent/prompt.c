/*
 * prompt.c: what an agent reads before it edits the kernel.
 */
#include <stdio.h>
#include <string.h>
#include "agent.h"
#include "dtype.h"
#include "paths.h"

static void add_contract(struct strbuf *sb, const struct problem *p)
{
	const struct op *op = p->op;
	char shape[128];

	shape_format(&p->bench, shape, sizeof(shape));
	strbuf_addf(sb, "## The op: %s (%s)\n\nShape %s; bench shape %s; "
		    "dtypes:", op->name, op->summary, op->dims, shape);
	for (int i = 0; i < p->n_dtypes; i++)
		strbuf_addf(sb, " %s", dtype_name(p->dtypes[i]));
	strbuf_addstr(sb, " (the first is benchmarked).\nInputs:");
	for (int i = 0; i < op->n_in; i++)
		strbuf_addf(sb, " %s%s", op->in_desc[i], i + 1 < op->n_in ? "," : "");
	strbuf_addf(sb, "\nOutput: %s\n", op->out_desc);
	if (op->scalar_desc)
		strbuf_addf(sb, "Scalars: %s\n", op->scalar_desc);
	strbuf_addf(sb, "Tolerance (|out - ref| <= atol + rtol |ref|, fp64 "
		    "reference): f16 %g+%g, bf16 %g+%g, f32 %g+%g. %s\n\n",
		    p->tol[0].atol, p->tol[0].rtol, p->tol[1].atol,
		    p->tol[1].rtol, p->tol[2].atol, p->tol[2].rtol, op->tol_why);
}

static void add_device(struct strbuf *sb, const struct agent_context *ctx)
{
	json_t *d = ctx->device, *m;

	strbuf_addf(sb, "## The device\n\nBackend %s", ctx->p->backend);
	if (!d) {
		strbuf_addstr(sb, "; ceilings not measured.\n\n");
		return;
	}
	m = json_object_get(d, "matrix_tflops");
	strbuf_addf(sb, ": %s; copy bandwidth %.0f GB/s",
		    json_string_value(json_object_get(json_object_get(d,
						"device"), "name")),
		    json_number_value(json_object_get(d, "copy_gbps")));
	if (m)
		strbuf_addf(sb, "; matrix rate f16 %.1f, bf16 %.1f, f32 %.1f "
			    "TFLOP/s", json_number_value(json_object_get(m, "f16")),
			    json_number_value(json_object_get(m, "bf16")),
			    json_number_value(json_object_get(m, "f32")));
	strbuf_addstr(sb, ".\n\n");
}

static void add_history(struct strbuf *sb, const struct agent_context *ctx)
{
	const struct history *h = ctx->h;
	size_t from = h->nr > 30 ? h->nr - 30 : 0;

	strbuf_addstr(sb, "## History (oldest first; do not repeat a "
		      "rejected idea)\n\n");
	for (size_t i = from; i < h->nr; i++) {
		const struct experiment *e = &h->e[i];
		json_t *n = e->note;

		strbuf_addf(sb, "- %s %s", e->attempt ? "rejected" : e->status,
			    e->subject);
		if (json_is_number(json_object_get(n, "time_us")))
			strbuf_addf(sb, " | %.2f us, %.0f%% of floor",
				    json_number_value(json_object_get(n, "time_us")),
				    100 * json_number_value(json_object_get(n,
								"roofline")));
		if (e->attempt)
			strbuf_addf(sb, " | %s",
				    json_string_value(json_object_get(n, "verdict")) ?
				    json_string_value(json_object_get(n, "verdict")) :
				    "no verdict");
		strbuf_addch(sb, '\n');
	}
	strbuf_addch(sb, '\n');
}

static void add_standing(struct strbuf *sb, const struct agent_context *ctx)
{
	const struct history *h = ctx->h;
	json_t *best = NULL, *last;

	for (size_t i = 0; i < h->nr; i++)
		if (!h->e[i].attempt && h->e[i].note)
			best = h->e[i].note;
	last = h->nr ? h->e[h->nr - 1].note : NULL;
	strbuf_addstr(sb, "## Where the kernel stands\n\n");
	if (best) {
		json_t *b = json_object_get(best, "bench");

		strbuf_addf(sb, "Current best: %.2f us at %s %s, %.0f%% of the "
			    "floor (%.2f us, %s-bound), %.2fx over the baseline.\n",
			    json_number_value(json_object_get(best, "time_us")),
			    json_string_value(json_object_get(b, "shape")),
			    json_string_value(json_object_get(b, "dtype")),
			    100 * json_number_value(json_object_get(best, "roofline")),
			    json_number_value(json_object_get(b, "floor_us")),
			    ctx->p->op->compute_bound ? "compute" : "memory",
			    json_number_value(json_object_get(best, "speedup")));
	}
	if (last && json_is_false(json_object_get(last, "keep")))
		strbuf_addf(sb, "\nThe last experiment failed: %s\n",
			    json_string_value(json_object_get(last, "verdict")));
	strbuf_addch(sb, '\n');
}

void prompt_build(struct strbuf *sb, const struct agent_context *ctx,
		  int with_kernel)
{
	struct strbuf text = STRBUF_INIT;

	strbuf_addf(sb, "# Task\n\nMake the %s kernel in %s faster on the "
		    "%s backend without breaking it. Edit only that file. It "
		    "must define `int ak_kernel(const struct ak_args *a)` "
		    "(include/autokernel.h); every candidate is built, checked "
		    "against an fp64 reference in five stages (smoke, shape "
		    "sweep, stability, determinism, edge cases) and timed "
		    "against the current best; it is kept only if it is "
		    "correct and faster. Give a one-line hypothesis: what you "
		    "changed and why it should be faster.\n\n", ctx->p->op->name,
		    ctx->kernel_rel, ctx->p->backend);
	add_contract(sb, ctx->p);
	add_device(sb, ctx);
	add_standing(sb, ctx);
	add_history(sb, ctx);
	if (with_kernel && strbuf_read_file(&text, ctx->kernel_path) >= 0)
		strbuf_addf(sb, "## The current kernel (%s)\n\n```\n%s```\n",
			    ctx->kernel_rel, text.buf);
	strbuf_release(&text);
}

int prompt_write(const struct agent_context *ctx)
{
	struct strbuf sb = STRBUF_INIT;
	int ret;

	prompt_build(&sb, ctx, 1);
	ret = write_file_atomic(ctx->prompt_path, sb.buf, sb.len);
	strbuf_release(&sb);
	return ret;
}
