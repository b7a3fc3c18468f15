/*
 * ops.h: the op registry.  Everything the judge knows about an op: its
 * tensors, shapes, default test/edge/bench shapes, input generators, the
 * fp64 reference, tolerances, and the bytes and flops of its roofline.
 *
 * An op's problem size is a `struct shape`: the op's named dimensions in
 * order (softmax "R,C", matmul "M,N,K", ...), written "4096x4096" on the
 * command line and in problem.json.  op_tensors() turns a shape and a dtype
 * into the op's dense, row-major tensors (data pointers left NULL).
 *
 * Usage:
 *
 *	const struct op *op = op_find("softmax");
 *	struct shape s;
 *	struct ak_tensor in[AK_OP_MAX_IN], out[AK_OP_MAX_OUT];
 *	shape_parse(&s, op, "4096x4096");
 *	op_tensors(op, &s, AK_F16, in, out);
 *	... allocate in[i].data, out[i].data (host memory) ...
 *	op_generate(op, &s, in, seed, GEN_NORMAL);
 *	for (r = 0; r < op_rows(op, &s); r++) {
 *		op->reference(&s, in, scalar, r, ref);   // op_row_len() doubles
 *		scale = op_row_scale(op, &s, in, scalar, r);
 *		... compare with the row of out[0] at op_row_offset(), each
 *		    element within op_tolerance(op, dt, ref[i], scale) ...
 *	}
 *
 * Rows: every op's output is split into independent rows so that a large
 * shape can be checked on a random sample of them (git-autokernel(1), JUDGING).  A row
 * is row_len consecutive elements of out[0] starting at r * row_len.
 */
#ifndef OPS_H
#define OPS_H

#include <stddef.h>
#include <stdint.h>
#include "ak-wire.h"
#include "autokernel.h"

#define AK_OP_MAX_IN 4
#define AK_OP_MAX_OUT 1
#define AK_OP_MAX_DIMS 4
#define AK_OP_MAX_SHAPES 12

struct shape {
	int n;
	int64_t d[AK_OP_MAX_DIMS];
};

/* Input distributions and the stability transforms of stage 3. */
enum gen_kind {
	GEN_NORMAL,     /* N(0,1) main input, op-specific for the others */
	GEN_UNIFORM,    /* U(-1,1) */
	GEN_LARGE,      /* main input scaled up, as far as the op allows */
	GEN_TINY,       /* main input scaled by 1e-4 (stays normal in f16) */
	GEN_MIXED,      /* each row at its own scale, log-uniform, 1e-3 .. */
	GEN_EQUAL,      /* main input one constant value */
	GEN_ZERO,       /* main input all zero */
	GEN_MASKED,     /* each row's prefix -inf (a mask), never the whole row */
	GEN_KINDS
};

/* Its name in verdicts and prompts: "large", "mixed-scale", "masked". */
const char *gen_name(enum gen_kind g);

struct tolerance {
	double atol, rtol;
};

struct op {
	const char *name;
	const char *summary;        /* one line for `ops` */
	const char *dims;           /* "R,C" */
	int n_dims;
	int n_in, n_out;
	const char *in_names[AK_OP_MAX_IN];   /* "x", "w", ... */
	const char *in_desc[AK_OP_MAX_IN];    /* "x[R,C]", "w[C]", ... */
	const char *out_desc;                 /* "y[R,C] softmax over C" */
	const char *scalar_desc;              /* "scalar[0]=eps=1e-5" or NULL */
	/*
	 * The layouts of the main input an op takes, NULL-terminated, or
	 * NULL for one: problem.json "layout" names one, and the kernel sees
	 * its index in scalar[0] (rotary_embedding: 0 interleaved pairs, 1
	 * half-split, as rotate_half() pairs x[i] with x[i+D/2]).
	 */
	const char *const *layouts;
	int compute_bound;          /* roofline against flops, else bytes */

	/* Default shapes, "AxBxC" strings, NULL-terminated lists. */
	const char *smoke_shape;
	const char *test_shapes[AK_OP_MAX_SHAPES];
	const char *edge_shapes[AK_OP_MAX_SHAPES];
	const char *bench_shape;        /* doc/ops.md, for GPU backends */
	const char *host_bench_shape;   /* the host backend's, CPU-sized */

	/* Bitmask of (1 << GEN_x) stability transforms that apply. */
	unsigned stability;

	/*
	 * Tolerances for f16, bf16, f32 (index by enum ak_dtype), and why.
	 * An element passes if |out - ref| <= op_tolerance(): atol times the
	 * row's scale (below) plus rtol * |ref|.
	 */
	struct tolerance tol[3];
	const char *tol_why;

	/*
	 * Optional: the magnitude atol is measured in for output row r, for
	 * ops whose rounding error grows with what a row sums rather than
	 * with its result (a sum that cancels to ~0 still carries the error
	 * of its large terms): reduce sqrt(C * sum x^2), matmul sqrt(K) *
	 * rms(A[m,:]) * rms(B), ...  NULL means 1 (atol is absolute).
	 */
	double (*row_scale)(const struct shape *s, const struct ak_tensor *in,
			    const double scalar[4], int64_t r);

	/* Checks a shape (e.g. D even for rotary); NULL or an error string. */
	const char *(*check_shape)(const struct shape *s);

	/* Tensor shapes for s; inputs take dt except integer ones (targets). */
	void (*tensors)(const struct shape *s, enum ak_dtype dt,
			struct ak_tensor *in, struct ak_tensor *out);

	/* The op's scalars for this shape (eps, attention scale). */
	void (*scalars)(const struct shape *s, double scalar[4]);

	/* Fills the inputs, already allocated on the host, from rng state. */
	void (*generate)(const struct shape *s, struct ak_tensor *in,
			 uint64_t seed, enum gen_kind kind);

	/* Number of independent output rows and elements per row. */
	int64_t (*rows)(const struct shape *s);
	int64_t (*row_len)(const struct shape *s);

	/*
	 * Optional: how the benchmark draws each input afresh for every
	 * timed call (ak-wire.h), over the defaults op_bench_gen() sets.
	 */
	void (*bench_gen)(const struct shape *s, enum ak_dtype dt,
			  struct ak_gen *g);
	/*
	 * Optional: the inputs output row r reads, elements [lo[i], lo[i] +
	 * n[i]) of input i, over op_row_deps()'s defaults (all of every
	 * input): the benchmark regenerates only these to check the row.
	 */
	void (*row_deps)(const struct shape *s, int64_t r, int64_t *lo,
			 int64_t *n);

	/* fp64 reference of output row r into ref[row_len]. */
	void (*reference)(const struct shape *s, const struct ak_tensor *in,
			  const double scalar[4], int64_t r, double *ref);

	/* Minimum bytes moved (each input read once, output written once). */
	double (*bytes)(const struct shape *s, enum ak_dtype dt);
	/* Floating-point operations (2 per multiply-add). */
	double (*flops)(const struct shape *s);
};

/* rotary_embedding's layouts, its scalar[0] */
enum { ROTARY_INTERLEAVED = 0, ROTARY_HALF = 1 };

extern const struct op *const ops[];    /* NULL-terminated, doc/ops.md order */

const struct op *op_find(const char *name);

/* "4096x4096" -> shape; 0, or -1 with a message in err (size errlen). */
int shape_parse(struct shape *s, const struct op *op, const char *str,
		char *err, size_t errlen);
/* shape -> "4096x4096" into buf. */
void shape_format(const struct shape *s, char *buf, size_t len);

static inline int64_t op_rows(const struct op *op, const struct shape *s)
{
	return op->rows(s);
}

static inline int64_t op_row_len(const struct op *op, const struct shape *s)
{
	return op->row_len(s);
}

/* Element index in out[0] of the first element of row r. */
static inline int64_t op_row_offset(const struct op *op,
				    const struct shape *s, int64_t r)
{
	return r * op->row_len(s);
}

static inline double op_row_scale(const struct op *op, const struct shape *s,
				  const struct ak_tensor *in,
				  const double scalar[4], int64_t r)
{
	return op->row_scale ? op->row_scale(s, in, scalar, r) : 1.0;
}

/*
 * The largest |out - ref| that passes for an element of a problem in dtype
 * dt: atol * scale + rtol * |ref| (scale from op_row_scale()), plus the
 * step where rounding is absolute: 2^-24 for f16 (its subnormals), 2^-126
 * for f32 and bf16 (denormals a kernel may flush to zero).  NaN in out
 * never passes: compare with !(fabs(out - ref) <= bound).
 */
double op_tolerance(const struct op *op, enum ak_dtype dt, double ref,
		    double scale);
/* The same bound for a tolerance of one's own (problem.json's). */
double tolerance_bound(const struct tolerance *t, enum ak_dtype dt,
		       double ref, double scale);

static inline void op_tensors(const struct op *op, const struct shape *s,
			      enum ak_dtype dt, struct ak_tensor *in,
			      struct ak_tensor *out)
{
	op->tensors(s, dt, in, out);
}

/* How the benchmark draws each input of op at s in dt: N(0,1)-like,
 * then the op's own bench_gen. */
void op_bench_gen(const struct op *op, const struct shape *s,
		  enum ak_dtype dt, struct ak_gen g[AK_OP_MAX_IN]);
/* The input elements output row r reads (in: the op's tensors at s). */
void op_row_deps(const struct op *op, const struct shape *s, int64_t r,
		 const struct ak_tensor *in, int64_t lo[AK_OP_MAX_IN],
		 int64_t n[AK_OP_MAX_IN]);

/* Seeded random numbers: splitmix64 seeding a xoshiro256** state. */
struct rng {
	uint64_t s[4];
};
void rng_seed(struct rng *r, uint64_t seed);
uint64_t rng_next(struct rng *r);
double rng_uniform(struct rng *r);      /* [0,1) */
double rng_normal(struct rng *r);       /* N(0,1) */

#endif
