/*
 * reduce, host starter: y[r] = sum of x[r,:].
 *
 * One OpenMP task per row.  The row is read in CHUNK pieces (f16/bf16
 * converted to float in a stack buffer, f32 read in place); each piece is
 * summed in UNROLL independent float lanes and the piece's sum is added into
 * a double.  Why it should be fast: the lanes break the add dependency chain
 * and let the compiler use full vectors, so the loop runs at memory speed;
 * the double across pieces keeps 8192-long rows accurate.
 *
 * Deterministic: a row is summed by one thread in a fixed order.
 */
#include <string.h>
#include "autokernel.h"
#include "ak-half.h"

#define CHUNK 256   /* autokernel: tune 256,512,1024,2048,4096 */
#define UNROLL 4    /* autokernel: tune 1,4,8,16,32,64 */

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

static float sum(const float *x, int n)
{
	float lane[UNROLL] = { 0 };
	float s = 0;
	int i = 0;

	for (; i + UNROLL <= n; i += UNROLL)
		for (int u = 0; u < UNROLL; u++)
			lane[u] += x[i + u];
	for (; i < n; i++)
		s += x[i];
	for (int u = 0; u < UNROLL; u++)
		s += lane[u];
	return s;
}

static float row_sum(const void *x, enum ak_dtype t, int64_t off, int64_t C)
{
	float buf[CHUNK];
	double s = 0;

	for (int64_t c = 0; c < C; c += CHUNK) {
		int n = (int)(C - c < CHUNK ? C - c : CHUNK);

		s += sum(load(buf, x, t, off + c, n), n);
	}
	return (float)s;
}

int ak_kernel(const struct ak_args *a)
{
	enum ak_dtype t = a->in[0].dtype;
	int64_t R = a->in[0].shape[0], C = a->in[0].shape[1];

	if (t != AK_F32 && t != AK_F16 && t != AK_BF16)
		return -1;

	#pragma omp parallel for schedule(static)
	for (int64_t r = 0; r < R; r++) {
		float s = row_sum(a->in[0].data, t, r * C, C);

		store(a->out[0].data, t, r, &s, 1);
	}
	return 0;
}
