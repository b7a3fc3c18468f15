/*
 * fused_mlp, host starter: y[T,D] = (silu(x wg^T) * (x wu^T)) wd^T with
 * x[T,D], wg/wu[F,D], wd[D,F], silu(z) = z / (1 + e^-z).
 *
 * Two passes through the workspace: h[T,F] = silu(x wg^T) * (x wu^T) kept in
 * float (no rounding of the intermediate), then y = h wd^T rounded once.
 * Both products have the reduction dimension contiguous in both operands, so
 * each output is a dot product; outputs are cut into TILE_T x TILE_N tiles
 * (one OpenMP task each) so a tile's weight rows stay in L2 while TILE_T
 * rows of x / h stream over them.  Gate and up share the x loads.  f16/bf16
 * operands are converted to float in the workspace once.  Why it should be
 * fast: every dot product runs in LANES independent float lanes (full
 * vectors, several FMA chains in flight) over cache-resident rows.
 * What it leaves: no register blocking across rows (each FMA loads both
 * operands).
 *
 * Deterministic: every output is one dot product in a fixed order.
 */
#include <string.h>
#include "autokernel.h"
#include "ak-half.h"

#define TILE_T 4    /* autokernel: tune 4,8,16,32,64 */
#define TILE_N 16   /* autokernel: tune 8,16,32,64,128 */
#define LANES 8     /* autokernel: tune 8,16,32,64 */

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

static void to_float(float *dst, const void *src, enum ak_dtype t, int64_t n)
{
	const uint16_t *h = src;

	if (t == AK_F16)
		for (int64_t i = 0; i < n; i++)
			dst[i] = ak_f16_to_f32(h[i]);
	else
		for (int64_t i = 0; i < n; i++)
			dst[i] = ak_bf16_to_f32(h[i]);
}

static void from_float(void *dst, const float *src, enum ak_dtype t, int n)
{
	uint16_t *h = dst;

	if (t == AK_F32)
		memcpy(dst, src, (size_t)n * sizeof(float));
	else if (t == AK_F16)
		for (int i = 0; i < n; i++)
			h[i] = ak_f32_to_f16(src[i]);
	else
		for (int i = 0; i < n; i++)
			h[i] = ak_f32_to_bf16(src[i]);
}

/* Converts a [rows, cols] f16/bf16 matrix to float, in parallel by rows. */
static void convert(float *dst, const void *src, enum ak_dtype t,
		    int64_t rows, int64_t cols)
{
	#pragma omp parallel for schedule(static)
	for (int64_t r = 0; r < rows; r++)
		to_float(dst + r * cols, (const uint16_t *)src + r * cols, t,
			 cols);
}

static float dot(const float *restrict a, const float *restrict b, int64_t n)
{
	float lane[LANES] = { 0 };
	float s = 0;
	int64_t k = 0;

	for (; k + LANES <= n; k += LANES)
		for (int u = 0; u < LANES; u++)
			lane[u] += a[k + u] * b[k + u];
	for (; k < n; k++)
		s += a[k] * b[k];
	for (int u = 0; u < LANES; u++)
		s += lane[u];
	return s;
}

static float silu(float z)
{
	return z / (1.0f + exp_f(-z));
}

/* end of block b of size n in [0, len) */
static int64_t block_end(int64_t b, int64_t n, int64_t len)
{
	return (b + 1) * n < len ? (b + 1) * n : len;
}

/* h[t, f] = silu(x_t . wg_f) * (x_t . wu_f), one tile per task */
static void gate_up(float *h, const float *x, const float *wg,
		    const float *wu, int64_t T, int64_t D, int64_t F)
{
	int64_t tt = (T + TILE_T - 1) / TILE_T, tf = (F + TILE_N - 1) / TILE_N;

	#pragma omp parallel for collapse(2) schedule(static)
	for (int64_t bt = 0; bt < tt; bt++)
		for (int64_t bf = 0; bf < tf; bf++) {
			int64_t f1 = block_end(bf, TILE_N, F);

			for (int64_t t = bt * TILE_T;
			     t < block_end(bt, TILE_T, T); t++) {
				const float *xt = x + t * D;

				for (int64_t f = bf * TILE_N; f < f1; f++)
					h[t * F + f] =
						silu(dot(xt, wg + f * D, D)) *
						dot(xt, wu + f * D, D);
			}
		}
}

/* y[t, d] = h_t . wd_d rounded to dt, one tile per task */
static void down(void *y, enum ak_dtype dt, const float *h, const float *wd,
		 int64_t T, int64_t D, int64_t F)
{
	int64_t tt = (T + TILE_T - 1) / TILE_T, td = (D + TILE_N - 1) / TILE_N;
	size_t es = dt == AK_F32 ? 4 : 2;

	#pragma omp parallel for collapse(2) schedule(static)
	for (int64_t bt = 0; bt < tt; bt++)
		for (int64_t bd = 0; bd < td; bd++) {
			int64_t d0 = bd * TILE_N;
			int n = (int)(block_end(bd, TILE_N, D) - d0);
			float yb[TILE_N];

			for (int64_t t = bt * TILE_T;
			     t < block_end(bt, TILE_T, T); t++) {
				for (int j = 0; j < n; j++)
					yb[j] = dot(h + t * F,
						    wd + (d0 + j) * F, F);
				from_float((char *)y + (t * D + d0) * es, yb,
					   dt, n);
			}
		}
}

size_t ak_workspace_size(const struct ak_args *a)
{
	int64_t T = a->in[0].shape[0], D = a->in[0].shape[1];
	int64_t F = a->in[1].shape[0];
	int64_t n = T * F;

	if (a->in[0].dtype != AK_F32)
		n += T * D + 3 * F * D;
	return (size_t)n * sizeof(float);
}

int ak_kernel(const struct ak_args *a)
{
	enum ak_dtype t = a->in[0].dtype;
	int64_t T = a->in[0].shape[0], D = a->in[0].shape[1];
	int64_t F = a->in[1].shape[0];
	float *h = a->workspace;
	const float *x = a->in[0].data, *wg = a->in[1].data;
	const float *wu = a->in[2].data, *wd = a->in[3].data;

	if (t != AK_F32 && t != AK_F16 && t != AK_BF16)
		return -1;
	if (t != AK_F32) {
		float *w = h + T * F;

		convert(w, x, t, T, D);
		convert(w + T * D, wg, t, F, D);
		convert(w + T * D + F * D, wu, t, F, D);
		convert(w + T * D + 2 * F * D, wd, t, D, F);
		x = w;
		wg = w + T * D;
		wu = w + T * D + F * D;
		wd = w + T * D + 2 * F * D;
	}
	gate_up(h, x, wg, wu, T, D, F);
	down(a->out[0].data, t, h, wd, T, D, F);
	return 0;
}
