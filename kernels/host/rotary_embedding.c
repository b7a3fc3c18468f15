/*
 * rotary_embedding, host starter, both layouts (scalar[0]): each pair (a, b)
 * of a row of x[.., s, :] becomes (a cos - b sin, a sin + b cos) with
 * cos/sin[s, i]; the pair is (x[2i], x[2i+1]) interleaved (0) or (x[i],
 * x[i+D/2]) half-split (1, transformers' rotate_half).
 *
 * Interleaved: cos and sin are first expanded in the workspace to full-width
 * float tables c[s, j] = cos[s, j/2] and t[s, j] = -sin / +sin for even / odd
 * j, so that every output is y[j] = x[j] c[j] + x[j^1] t[j]: one contiguous,
 * vectorizable loop with a neighbour swap instead of a strided pair loop.
 * Half-split: the tables are cos and sin as floats, and the two halves of a
 * row are two contiguous streams read side by side.  The work is cut into
 * blocks of BLOCK_S positions, one OpenMP task each, looping over all B*H
 * heads inside so the block's tables stay in L1 while every head reuses
 * them.  Why it should be fast: one read of x, one write of y, the tables
 * from cache.
 *
 * Deterministic: no reductions.
 */
#include <string.h>
#include "autokernel.h"
#include "ak-half.h"

#define BLOCK_S 1   /* autokernel: tune 1,2,4,8,16,32 */
#define PIECE 256   /* elements of a row converted at a time (even) */

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

size_t ak_workspace_size(const struct ak_args *a)
{
	return 2 * (size_t)a->in[0].shape[2] * a->in[0].shape[3] *
	       sizeof(float);
}

/* c[s, :] and t[s, :] from cos[s, :] and sin[s, :] (D/2 each) */
static void expand(float *c, float *t, const void *cs, const void *sn,
		   enum ak_dtype dt, int64_t s, int64_t D, int half_split)
{
	for (int64_t i0 = 0; i0 < D / 2; i0 += PIECE) {
		int n = (int)(D / 2 - i0 < PIECE ? D / 2 - i0 : PIECE);
		float cb[PIECE], sb[PIECE];
		const float *cv = load(cb, cs, dt, s * (D / 2) + i0, n);
		const float *sv = load(sb, sn, dt, s * (D / 2) + i0, n);

		for (int i = 0; i < n; i++) {
			if (half_split) {
				c[i0 + i] = cv[i];
				t[i0 + i] = sv[i];
				continue;
			}
			c[2 * (i0 + i)] = c[2 * (i0 + i) + 1] = cv[i];
			t[2 * (i0 + i)] = -sv[i];
			t[2 * (i0 + i) + 1] = sv[i];
		}
	}
}

/* y[off .. off+D) = rotated x[off .. off+D), interleaved, tables c, t */
static void rotate_row(void *y, const void *x, const float *c, const float *t,
		       enum ak_dtype dt, int64_t off, int64_t D)
{
	for (int64_t j0 = 0; j0 < D; j0 += PIECE) {
		int n = (int)(D - j0 < PIECE ? D - j0 : PIECE);
		float xb[PIECE], yb[PIECE];
		const float *v = load(xb, x, dt, off + j0, n);

		for (int j = 0; j < n; j++)
			yb[j] = v[j] * c[j0 + j] + v[j ^ 1] * t[j0 + j];
		store(y, dt, off + j0, yb, n);
	}
}

/* The same, half-split: x[i] pairs with x[i + D/2]; c, t are cos, sin */
static void rotate_row_half(void *y, const void *x, const float *c,
			    const float *t, enum ak_dtype dt, int64_t off,
			    int64_t D)
{
	int64_t h = D / 2;

	for (int64_t i0 = 0; i0 < h; i0 += PIECE) {
		int n = (int)(h - i0 < PIECE ? h - i0 : PIECE);
		float ab[PIECE], bb[PIECE], ya[PIECE], yb[PIECE];
		const float *a = load(ab, x, dt, off + i0, n);
		const float *b = load(bb, x, dt, off + h + i0, n);

		for (int i = 0; i < n; i++) {
			ya[i] = a[i] * c[i0 + i] - b[i] * t[i0 + i];
			yb[i] = b[i] * c[i0 + i] + a[i] * t[i0 + i];
		}
		store(y, dt, off + i0, ya, n);
		store(y, dt, off + h + i0, yb, n);
	}
}

static void rotate(const struct ak_args *a, const float *c, const float *t,
		   int64_t off, int half_split)
{
	enum ak_dtype dt = a->in[0].dtype;
	int64_t D = a->in[0].shape[3];

	if (half_split)
		rotate_row_half(a->out[0].data, a->in[0].data, c, t, dt, off,
				D);
	else
		rotate_row(a->out[0].data, a->in[0].data, c, t, dt, off, D);
}

int ak_kernel(const struct ak_args *a)
{
	enum ak_dtype dt = a->in[0].dtype;
	int64_t BH = a->in[0].shape[0] * a->in[0].shape[1];
	int64_t S = a->in[0].shape[2], D = a->in[0].shape[3];
	int64_t nblk = (S + BLOCK_S - 1) / BLOCK_S;
	float *c = a->workspace, *t = c + S * D;
	int half_split = a->scalar[0] == 1;

	if (dt != AK_F32 && dt != AK_F16 && dt != AK_BF16)
		return -1;
	if (D % 2 || (a->scalar[0] != 0 && !half_split))
		return -1;

	#pragma omp parallel
	{
		#pragma omp for schedule(static)
		for (int64_t s = 0; s < S; s++)
			expand(c + s * D, t + s * D, a->in[1].data,
			       a->in[2].data, dt, s, D, half_split);

		#pragma omp for schedule(static)
		for (int64_t blk = 0; blk < nblk; blk++) {
			int64_t s1 = (blk + 1) * BLOCK_S < S ?
				     (blk + 1) * BLOCK_S : S;

			for (int64_t bh = 0; bh < BH; bh++)
				for (int64_t s = blk * BLOCK_S; s < s1; s++)
					rotate(a, c + s * D, t + s * D,
					       (bh * S + s) * D, half_split);
		}
	}
	return 0;
}
