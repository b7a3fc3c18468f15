/*
 * rmsnorm, host starter: y = x / sqrt(mean(x^2) + eps) * w, per row.
 *
 * w is converted to float once into the workspace.  One OpenMP task per row.
 * A row of at most CHUNK elements is converted to float once into a stack
 * buffer and both passes (sum of squares, scale) run on it in cache; a longer
 * row is read twice in CHUNK pieces.  Why it should be fast: the sum of
 * squares runs in UNROLL independent float lanes (full vectors, no add
 * dependency chain); each chunk's float sum is added into a double, so long
 * rows and large values (300^2 x 4096) lose nothing.
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

static float sum_squares(const float *x, int n)
{
	float lane[UNROLL] = { 0 };
	float s = 0;
	int i = 0;

	for (; i + UNROLL <= n; i += UNROLL)
		for (int u = 0; u < UNROLL; u++)
			lane[u] += x[i + u] * x[i + u];
	for (; i < n; i++)
		s += x[i] * x[i];
	for (int u = 0; u < UNROLL; u++)
		s += lane[u];
	return s;
}

/* out[i] = x[i] * k * w[i] (out may be x) */
static void scale(float *out, const float *x, const float *w, int n, float k)
{
	for (int i = 0; i < n; i++)
		out[i] = x[i] * k * w[i];
}

static void rmsnorm_row(void *y, const void *x, const float *w,
			enum ak_dtype t, int64_t off, int64_t C, double eps)
{
	float buf[CHUNK];
	double ss = 0;
	float k;

	if (C <= CHUNK) {
		const float *v = load(buf, x, t, off, (int)C);

		k = (float)inv_sqrt((sum_squares(v, (int)C) / C + eps));
		scale(buf, v, w, (int)C, k);
		store(y, t, off, buf, (int)C);
		return;
	}
	for (int64_t c = 0; c < C; c += CHUNK) {
		int n = (int)(C - c < CHUNK ? C - c : CHUNK);

		ss += sum_squares(load(buf, x, t, off + c, n), n);
	}
	k = (float)inv_sqrt((ss / C + eps));
	for (int64_t c = 0; c < C; c += CHUNK) {
		int n = (int)(C - c < CHUNK ? C - c : CHUNK);

		scale(buf, load(buf, x, t, off + c, n), w + c, n, k);
		store(y, t, off + c, buf, n);
	}
}

size_t ak_workspace_size(const struct ak_args *a)
{
	return (size_t)a->in[0].shape[1] * sizeof(float);
}

int ak_kernel(const struct ak_args *a)
{
	enum ak_dtype t = a->in[0].dtype;
	int64_t R = a->in[0].shape[0], C = a->in[0].shape[1];
	float *w = a->workspace;

	if (t != AK_F32 && t != AK_F16 && t != AK_BF16)
		return -1;
	for (int64_t c = 0; c < C; c += CHUNK) {
		int n = (int)(C - c < CHUNK ? C - c : CHUNK);
		const float *v = load(w + c, a->in[1].data, t, c, n);

		if (v != w + c)
			memcpy(w + c, v, (size_t)n * sizeof(float));
	}

	#pragma omp parallel for schedule(static)
	for (int64_t r = 0; r < R; r++)
		rmsnorm_row(a->out[0].data, a->in[0].data, w, t, r * C, C,
			    a->scalar[0]);
	return 0;
}
