/*
 * softmax, host starter: y[r,:] = exp(x[r,:] - max) / sum exp(x[r,:] - max).
 *
 * One OpenMP task per row.  A row of at most CHUNK elements is converted to
 * float once into a stack buffer and done in cache: max, exp and sum in one
 * sweep, scale, store.  A longer row is streamed in CHUNK-sized pieces in
 * three passes (max; sum of exp; exp, scale, store), exp computed twice.
 * Why it should be fast: exp is a vectorizable polynomial (no libm call in
 * the loop) and the max and the sum run in UNROLL independent lanes, which
 * breaks the add/max dependency chain and lets the compiler use full vectors.
 *
 * Deterministic: a row's lanes are combined in a fixed order by one thread.
 */
#include <math.h>
#include <string.h>
#include "autokernel.h"
#include "ak-half.h"

#define CHUNK 1024  /* autokernel: tune 256,512,1024,2048,4096,8192 */
#define UNROLL 4    /* autokernel: tune 1,4,8,16,32,64 */

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

static float chunk_max(const float *x, int n, float m)
{
	float lane[UNROLL];
	int i = 0;

	for (int u = 0; u < UNROLL; u++)
		lane[u] = m;
	for (; i + UNROLL <= n; i += UNROLL)
		for (int u = 0; u < UNROLL; u++)
			lane[u] = x[i + u] > lane[u] ? x[i + u] : lane[u];
	for (; i < n; i++)
		m = x[i] > m ? x[i] : m;
	for (int u = 0; u < UNROLL; u++)
		m = lane[u] > m ? lane[u] : m;
	return m;
}

/* e[i] = exp(x[i] - m) (e may be x); returns the sum of the e[i]. */
static float chunk_exp_sum(float *e, const float *x, int n, float m)
{
	float lane[UNROLL] = { 0 };
	float s = 0;
	int i = 0;

	for (; i + UNROLL <= n; i += UNROLL)
		for (int u = 0; u < UNROLL; u++) {
			e[i + u] = exp_f(x[i + u] - m);
			lane[u] += e[i + u];
		}
	for (; i < n; i++) {
		e[i] = exp_f(x[i] - m);
		s += e[i];
	}
	for (int u = 0; u < UNROLL; u++)
		s += lane[u];
	return s;
}

static void scale(float *e, int n, float k)
{
	for (int i = 0; i < n; i++)
		e[i] *= k;
}

static void softmax_row(void *y, const void *x, enum ak_dtype t, int64_t off,
			int64_t C)
{
	float buf[CHUNK];
	float m = -INFINITY;
	double s = 0;

	if (C <= CHUNK) {
		const float *v = load(buf, x, t, off, (int)C);

		m = chunk_max(v, (int)C, m);
		s = chunk_exp_sum(buf, v, (int)C, m);
		scale(buf, (int)C, (float)(1.0 / s));
		store(y, t, off, buf, (int)C);
		return;
	}
	for (int64_t c = 0; c < C; c += CHUNK) {
		int n = (int)(C - c < CHUNK ? C - c : CHUNK);

		m = chunk_max(load(buf, x, t, off + c, n), n, m);
	}
	for (int64_t c = 0; c < C; c += CHUNK) {
		int n = (int)(C - c < CHUNK ? C - c : CHUNK);

		s += chunk_exp_sum(buf, load(buf, x, t, off + c, n), n, m);
	}
	for (int64_t c = 0; c < C; c += CHUNK) {
		int n = (int)(C - c < CHUNK ? C - c : CHUNK);

		chunk_exp_sum(buf, load(buf, x, t, off + c, n), n, m);
		scale(buf, n, (float)(1.0 / s));
		store(y, t, off + c, buf, n);
	}
}

int ak_kernel(const struct ak_args *a)
{
	enum ak_dtype t = a->in[0].dtype;
	int64_t R = a->in[0].shape[0], C = a->in[0].shape[1];

	if (t != AK_F32 && t != AK_F16 && t != AK_BF16)
		return -1;

	#pragma omp parallel for schedule(static)
	for (int64_t r = 0; r < R; r++)
		softmax_row(a->out[0].data, a->in[0].data, t, r * C, C);
	return 0;
}
