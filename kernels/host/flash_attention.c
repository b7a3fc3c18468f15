/*
 * flash_attention, host starter: o = softmax(scale q k^T, causal) v per
 * (batch, head), q, k, v, o [B, H, S, D].
 *
 * Flash-style: a task is one block of BLOCK_Q queries of one head; it walks
 * the keys it may see (j <= i) in blocks of BLOCK_K, converted to float in
 * a per-thread scratch (K transposed, so q.k vectorizes over keys), and
 * keeps an online softmax per query (running max m, sum l, float output
 * accumulator, rescaled when m grows).  The S x S score matrix never exists.
 * Why it should be fast: each K/V block is converted once per query block
 * and reused by BLOCK_Q queries from L1/L2; exp is a vectorizable
 * polynomial; tasks go round-robin so the causal triangle stays balanced.
 *
 * Scratch: the workspace holds one float scratch per OpenMP thread (its
 * size depends on D, so any head dim works); the parallel region never uses
 * more threads than the workspace has room for.
 *
 * Deterministic: each output row is computed by one thread in a fixed order.
 */
#include <math.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "autokernel.h"
#include "ak-half.h"

#define BLOCK_Q 16  /* autokernel: tune 4,8,16,32,64 */
#define BLOCK_K 16  /* autokernel: tune 16,32,64,128,256 */

/*
 * exp(x) in float without libm, so that loops calling it vectorize:
 * x = n ln2 + r with |r| <= ln2/2, exp(r) by its degree-6 Taylor polynomial
 * (error ~1e-7 relative), times 2^n built in the exponent bits.  Below -87
 * the result is 0 (exp(-inf) included); above 88 it is exp(88).  No libm:
 * the harness links kernels without -lm.
 */
static inline float exp_f(float x)
{
	float c = x < -87.0f ? -87.0f : x > 88.0f ? 88.0f : x;
	/* adding then subtracting 1.5 * 2^23 rounds to the nearest integer */
	float n = (c * 1.44269504f + 12582912.0f) - 12582912.0f;
	float r = c - n * 0.693145752f - n * 1.42860677e-6f;
	float p = 1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6 +
		  r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720))))));

	p *= ak_bits_f32((uint32_t)((int32_t)n + 127) << 23);
	return x < -87.0f ? 0.0f : p;
}

/*
 * A float view of n elements of src from element off: f32 is read in place,
 * f16/bf16 are converted into buf (n floats).
 */
static const float *load(float *buf, const void *src, enum ak_dtype t,
			 int64_t off, int n)
{
	const uint16_t *h = (const uint16_t *)src + off;

	if (t == AK_F32)
		return (const float *)src + off;
	if (t == AK_F16)
		for (int i = 0; i < n; i++)
			buf[i] = ak_f16_to_f32(h[i]);
	else
		for (int i = 0; i < n; i++)
			buf[i] = ak_bf16_to_f32(h[i]);
	return buf;
}

/* Stores n floats to dst from element off, rounded to t. */
static void store(void *dst, enum ak_dtype t, int64_t off, const float *src,
		  int n)
{
	uint16_t *h = (uint16_t *)dst + off;

	if (t == AK_F32)
		memcpy((float *)dst + off, src, (size_t)n * sizeof(float));
	else if (t == AK_F16)
		for (int i = 0; i < n; i++)
			h[i] = ak_f32_to_f16(src[i]);
	else
		for (int i = 0; i < n; i++)
			h[i] = ak_f32_to_bf16(src[i]);
}

struct scratch {
	float *q;       /* [BLOCK_Q][D] */
	float *acc;     /* [BLOCK_Q][D] */
	float *kt;      /* [D][BLOCK_K], K transposed */
	float *v;       /* [BLOCK_K][D] */
	float *m, *l;   /* [BLOCK_Q] running max and sum */
};

static size_t scratch_floats(int64_t D)
{
	return (size_t)(2 * BLOCK_Q * D + 2 * BLOCK_K * D + 2 * BLOCK_Q);
}

static int max_threads(void)
{
#ifdef _OPENMP
	return omp_get_max_threads();
#else
	return 1;
#endif
}

size_t ak_workspace_size(const struct ak_args *a)
{
	return (size_t)max_threads() * scratch_floats(a->in[0].shape[3]) *
	       sizeof(float);
}

static void scratch_init(struct scratch *w, float *base, int64_t D)
{
	w->q = base;
	w->acc = w->q + BLOCK_Q * D;
	w->kt = w->acc + BLOCK_Q * D;
	w->v = w->kt + BLOCK_K * D;
	w->m = w->v + BLOCK_K * D;
	w->l = w->m + BLOCK_Q;
}

/* Loads nk rows of K (transposed) and V from row j0 of the head at base. */
static void load_kv(struct scratch *w, const void *k, const void *v,
		    enum ak_dtype t, int64_t base, int64_t j0, int nk,
		    int64_t D)
{
	float row[256];

	for (int j = 0; j < nk; j++) {
		int64_t off = base + (j0 + j) * D;

		for (int64_t d0 = 0; d0 < D; d0 += 256) {
			int n = (int)(D - d0 < 256 ? D - d0 : 256);
			const float *kr = load(row, k, t, off + d0, n);

			for (int d = 0; d < n; d++)
				w->kt[(d0 + d) * BLOCK_K + j] = kr[d];
		}
		for (int64_t d0 = 0; d0 < D; d0 += 256) {
			int n = (int)(D - d0 < 256 ? D - d0 : 256);

			memcpy(w->v + j * D + d0,
			       load(w->v + j * D + d0, v, t, off + d0, n),
			       (size_t)n * sizeof(float));
		}
	}
}

/* Folds keys j0 .. j0+jn-1 of the loaded block into query row i. */
static void attend_row(struct scratch *w, int i, int jn, int64_t D,
		       float scale)
{
	const float *q = w->q + i * D;
	float *acc = w->acc + i * D;
	float sc[BLOCK_K];
	float mx = -INFINITY, sum = 0, corr;

	for (int j = 0; j < jn; j++)
		sc[j] = 0;
	for (int64_t d = 0; d < D; d++)
		for (int j = 0; j < jn; j++)
			sc[j] += q[d] * w->kt[d * BLOCK_K + j];
	for (int j = 0; j < jn; j++) {
		sc[j] *= scale;
		mx = sc[j] > mx ? sc[j] : mx;
	}
	mx = mx > w->m[i] ? mx : w->m[i];
	corr = exp_f(w->m[i] - mx);
	for (int j = 0; j < jn; j++) {
		sc[j] = exp_f(sc[j] - mx);
		sum += sc[j];
	}
	w->l[i] = w->l[i] * corr + sum;
	w->m[i] = mx;
	for (int64_t d = 0; d < D; d++)
		acc[d] *= corr;
	for (int j = 0; j < jn; j++)
		for (int64_t d = 0; d < D; d++)
			acc[d] += sc[j] * w->v[j * D + d];
}

/* o for queries i0 .. i0+nq-1 of the head starting at element base */
static void attend_block(struct scratch *w, const struct ak_args *a,
			 int64_t base, int64_t i0, int nq)
{
	enum ak_dtype t = a->in[0].dtype;
	int64_t D = a->in[0].shape[3];
	float scale = (float)a->scalar[0];

	for (int i = 0; i < nq; i++) {
		const float *qr = load(w->q + i * D, a->in[0].data, t,
				       base + (i0 + i) * D, (int)D);

		if (qr != w->q + i * D)
			memcpy(w->q + i * D, qr, (size_t)D * sizeof(float));
		memset(w->acc + i * D, 0, (size_t)D * sizeof(float));
		w->m[i] = -INFINITY;
		w->l[i] = 0;
	}
	for (int64_t j0 = 0; j0 < i0 + nq; j0 += BLOCK_K) {
		int nk = (int)(i0 + nq - j0 < BLOCK_K ? i0 + nq - j0 : BLOCK_K);

		load_kv(w, a->in[1].data, a->in[2].data, t, base, j0, nk, D);
		for (int i = 0; i < nq; i++) {
			int64_t jn = i0 + i - j0 + 1;   /* causal: j <= i */

			if (jn > 0)
				attend_row(w, i, (int)(jn < nk ? jn : nk), D,
					   scale);
		}
	}
	for (int i = 0; i < nq; i++) {
		float *acc = w->acc + i * D;
		float inv = 1.0f / w->l[i];

		for (int64_t d = 0; d < D; d++)
			acc[d] *= inv;
		store(a->out[0].data, t, base + (i0 + i) * D, acc, (int)D);
	}
}

int ak_kernel(const struct ak_args *a)
{
	enum ak_dtype t = a->in[0].dtype;
	int64_t BH = a->in[0].shape[0] * a->in[0].shape[1];
	int64_t S = a->in[0].shape[2], D = a->in[0].shape[3];
	int64_t nqb = (S + BLOCK_Q - 1) / BLOCK_Q;
	size_t per = scratch_floats(D) * sizeof(float);
	int nthr = (int)(a->workspace_size / per);

	if (t != AK_F32 && t != AK_F16 && t != AK_BF16)
		return -1;
	if (nthr < 1)
		return -1;

	#pragma omp parallel num_threads(nthr)
	{
		struct scratch w;
		int me = 0;

#ifdef _OPENMP
		me = omp_get_thread_num();
#endif
		scratch_init(&w, (float *)a->workspace + me * (per / 4), D);

		/* round-robin: causal blocks late in S cost more */
		#pragma omp for schedule(static, 1)
		for (int64_t u = 0; u < BH * nqb; u++) {
			int64_t bh = u / nqb, i0 = u % nqb * BLOCK_Q;
			int nq = (int)(S - i0 < BLOCK_Q ? S - i0 : BLOCK_Q);

			attend_block(&w, a, bh * S * D, i0, nq);
		}
	}
	return 0;
}
