/*
 * layernorm, host starter: y = (x - mean) / sqrt(var + eps) * w + b per row,
 * biased variance.
 *
 * w and b are converted to float once into the workspace.  One OpenMP task
 * per row.  The variance is two-pass (mean first, shifted by the row's first
 * element, then the sum of squared deviations): accurate for rows with a
 * large mean, and exactly 0 for an all-equal row.  A row of at most
 * CHUNK elements is converted once into a stack buffer and all three sweeps
 * run on it in cache; a longer row is read three times in CHUNK pieces.
 * Why it should be fast: the sums run in UNROLL independent float lanes
 * (full vectors, no add dependency chain); each chunk's sum goes into a
 * double.
 *
 * Deterministic: a row is reduced by one thread in a fixed order.
 */
#include <string.h>
#include "autokernel.h"
#include "ak-half.h"

#define CHUNK 512   /* autokernel: tune 256,512,1024,2048,4096,8192 */
#define UNROLL 4    /* autokernel: tune 1,4,8,16,32,64 */

/*
 * 1/sqrt(v) for v > 0 without libm (the harness links kernels without -lm):
 * a bit-trick first guess (3% off) refined by five Newton steps, which
 * square the error each time, to double precision.
 */
static double inv_sqrt(double v)
{
	uint64_t i;
	double y;

	memcpy(&i, &v, 8);
	i = 0x5fe6eb50c7b537a9ull - (i >> 1);
	memcpy(&y, &i, 8);
	for (int k = 0; k < 5; k++)
		y *= 1.5 - 0.5 * v * y * y;
	return y;
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

/* sum of (x[i] - m)^k for k = 1 or 2, in UNROLL lanes */
static float sum_pow(const float *x, int n, float m, int k)
{
	float lane[UNROLL] = { 0 };
	float s = 0;
	int i = 0;

	for (; i + UNROLL <= n; i += UNROLL)
		for (int u = 0; u < UNROLL; u++) {
			float d = x[i + u] - m;

			lane[u] += k == 2 ? d * d : d;
		}
	for (; i < n; i++)
		s += k == 2 ? (x[i] - m) * (x[i] - m) : x[i] - m;
	for (int u = 0; u < UNROLL; u++)
		s += lane[u];
	return s;
}

/* out[i] = (x[i] - m) * k * w[i] + b[i] (out may be x) */
static void scale(float *out, const float *x, const float *w, const float *b,
		  int n, float m, float k)
{
	for (int i = 0; i < n; i++)
		out[i] = (x[i] - m) * k * w[i] + b[i];
}

static void layernorm_row(void *y, const void *x, const float *w,
			  const float *b, enum ak_dtype t, int64_t off,
			  int64_t C, double eps)
{
	float buf[CHUNK];
	double s = 0, ss = 0;
	float x0 = load(buf, x, t, off, 1)[0];
	float m, k;

	/* the mean is x0 + mean(x - x0): exact for an all-equal row */
	if (C <= CHUNK) {
		const float *v = load(buf, x, t, off, (int)C);

		m = x0 + sum_pow(v, (int)C, x0, 1) / (float)C;
		k = (float)inv_sqrt((sum_pow(v, (int)C, m, 2) / C + eps));
		scale(buf, v, w, b, (int)C, m, k);
		store(y, t, off, buf, (int)C);
		return;
	}
	for (int64_t c = 0; c < C; c += CHUNK) {
		int n = (int)(C - c < CHUNK ? C - c : CHUNK);

		s += sum_pow(load(buf, x, t, off + c, n), n, x0, 1);
	}
	m = x0 + (float)(s / C);
	for (int64_t c = 0; c < C; c += CHUNK) {
		int n = (int)(C - c < CHUNK ? C - c : CHUNK);

		ss += sum_pow(load(buf, x, t, off + c, n), n, m, 2);
	}
	k = (float)inv_sqrt((ss / C + eps));
	for (int64_t c = 0; c < C; c += CHUNK) {
		int n = (int)(C - c < CHUNK ? C - c : CHUNK);

		scale(buf, load(buf, x, t, off + c, n), w + c, b + c, n, m, k);
		store(y, t, off + c, buf, n);
	}
}

size_t ak_workspace_size(const struct ak_args *a)
{
	return 2 * (size_t)a->in[0].shape[1] * sizeof(float);
}

/* dst[0..C) = src as float, in CHUNK pieces */
static void weights(float *dst, const void *src, enum ak_dtype t, int64_t C)
{
	for (int64_t c = 0; c < C; c += CHUNK) {
		int n = (int)(C - c < CHUNK ? C - c : CHUNK);
		const float *v = load(dst + c, src, t, c, n);

		if (v != dst + c)
			memcpy(dst + c, v, (size_t)n * sizeof(float));
	}
}

int ak_kernel(const struct ak_args *a)
{
	enum ak_dtype t = a->in[0].dtype;
	int64_t R = a->in[0].shape[0], C = a->in[0].shape[1];
	float *w = a->workspace, *b = w + C;

	if (t != AK_F32 && t != AK_F16 && t != AK_BF16)
		return -1;
	weights(w, a->in[1].data, t, C);
	weights(b, a->in[2].data, t, C);

	#pragma omp parallel for schedule(static)
	for (int64_t r = 0; r < R; r++)
		layernorm_row(a->out[0].data, a->in[0].data, w, b, t, r * C,
			      C, a->scalar[0]);
	return 0;
}
