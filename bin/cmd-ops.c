#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <jansson.h>
#include "bin/builtin.h"
#include "ops/dtype.h"
#include "ops/ops.h"
#include "ops/problem.h"
#include "backends/build.h"
#include <stdlib.h>
#include "lib/usage.h"

static const char usage_ops[] =
	"usage: git autokernel ops [--json] [<op>]\n"
	"   or: git autokernel ops <op> --problem [--backend B]\n"
	"\n"
	"--problem prints the op's default problem.json for a backend (host\n"
	"benches at CPU-sized shapes), to edit and pass to 'start --problem'.\n";

static json_t *op_json(const struct op *op)
{
	json_t *in = json_array(), *t = json_object(), *tests = json_array();
	json_t *edges = json_array(), *layouts = json_array();

	for (int i = 0; i < op->n_in; i++)
		json_array_append_new(in, json_string(op->in_desc[i]));
	for (int d = 0; d < 3; d++)
		json_object_set_new(t, dtype_name((enum ak_dtype)d),
			json_pack("{s:f,s:f}", "atol", op->tol[d].atol,
				  "rtol", op->tol[d].rtol));
	for (int i = 0; op->test_shapes[i]; i++)
		json_array_append_new(tests, json_string(op->test_shapes[i]));
	for (int i = 0; op->edge_shapes[i]; i++)
		json_array_append_new(edges, json_string(op->edge_shapes[i]));
	for (int i = 0; op->layouts && op->layouts[i]; i++)
		json_array_append_new(layouts, json_string(op->layouts[i]));
	return json_pack("{s:s,s:s,s:s,s:o,s:s,s:s?,s:o,s:s,s:s,s:s,s:o,s:o,s:o,"
			 "s:s,s:b}",
		"name", op->name, "summary", op->summary, "shape", op->dims,
		"inputs", in, "output", op->out_desc, "scalars", op->scalar_desc,
		"layouts", layouts,
		"smoke_shape", op->smoke_shape, "bench_shape", op->bench_shape,
		"host_bench_shape", op->host_bench_shape, "test_shapes", tests,
		"edge_shapes", edges, "tolerances", t, "tolerance_why",
		op->tol_why, "compute_bound", op->compute_bound);
}

static void print_op(const struct op *op, int verbose)
{
	printf("%-17s %-13s %s\n", op->name, op->dims, op->summary);
	if (!verbose)
		return;
	printf("  inputs:   ");
	for (int i = 0; i < op->n_in; i++)
		printf("%s%s", i ? ", " : "", op->in_desc[i]);
	printf("\n  output:   %s\n", op->out_desc);
	if (op->scalar_desc)
		printf("  scalars:  %s\n", op->scalar_desc);
	for (int i = 0; op->layouts && op->layouts[i]; i++)
		printf("%s%s (%d)%s", i ? ", " : "  layouts:  ", op->layouts[i],
		       i, op->layouts[i + 1] ? "" : "; start --layout L, "
		       "problem.json \"layout\"\n");
	printf("  bound:    %s\n", op->compute_bound ? "compute (flops over "
	       "the matrix rate)" : "memory (a copy of the same bytes)");
	printf("  shapes:   smoke %s; bench %s (host %s)\n  tests:   ",
	       op->smoke_shape, op->bench_shape, op->host_bench_shape);
	for (int i = 0; op->test_shapes[i]; i++)
		printf(" %s", op->test_shapes[i]);
	printf("\n  edges:   ");
	for (int i = 0; op->edge_shapes[i]; i++)
		printf(" %s", op->edge_shapes[i]);
	printf("\n  tolerance (atol + rtol*|ref|):");
	for (int d = 0; d < 3; d++)
		printf(" %s %.0e+%.0e", dtype_name((enum ak_dtype)d),
		       op->tol[d].atol, op->tol[d].rtol);
	printf("\n    %s\n\n", op->tol_why);
}

int cmd_ops(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "problem", no_argument, NULL, 'p' },
		{ "backend", required_argument, NULL, 'b' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int json = 0, problem = 0, c;
	const struct op *one = NULL;
	const char *backend = "host";

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (c == 'j')
			json = 1;
		else if (c == 'p')
			problem = 1;
		else if (c == 'b')
			backend = optarg;
		else
			return usage_with(usage_ops, c == 'h');
	}
	if (optind < argc && !(one = op_find(argv[optind]))) {
		error("unknown op '%s'", argv[optind]);
		return EXIT_USAGE;
	}
	if (problem) {
		struct problem p;
		char *text;

		if (!one || optind + 1 != argc)
			return usage_with(usage_ops, 0);
		if (!backend_known(backend)) {
			error("unknown backend '%s'", backend);
			return EXIT_USAGE;
		}
		problem_default(&p, one, backend);
		text = problem_dump(&p);
		printf("%s\n", text);
		free(text);
		return 0;
	}
	if (json) {
		json_t *all = json_array();

		for (int i = 0; ops[i]; i++)
			if (!one || one == ops[i])
				json_array_append_new(all, op_json(ops[i]));
		json_dumpf(all, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		putchar('\n');
		json_decref(all);
		return 0;
	}
	for (int i = 0; ops[i]; i++)
		if (!one || one == ops[i])
			print_op(ops[i], !!one);
	if (!one)
		printf("\n'git autokernel ops <op>' shows tensors, shapes and "
		       "tolerances; dtypes: f16, bf16, f32.\n");
	return 0;
}
