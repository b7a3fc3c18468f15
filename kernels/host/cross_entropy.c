/*
 * cross_entropy, host starter: loss = mean over n of
 * logsumexp(logits[n,:]) - logits[n, target[n]], a float scalar.
 *
 * One OpenMP task per row; the row is read once, in CHUNK pieces, with an
 * online logsumexp: each piece's max m_c rescales the running sum when it
 * exceeds the running max, so nothing overflows and there is one exp per
 * logit.  The per-row losses go to the workspace (double) and are summed
 * in row order after the parallel loop.  Why it should be fast: one pass
 * over the logits, a vectorizable polynomial exp, and max/sum in UNROLL
 * independent lanes.
 *
 * Deterministic: rows are reduced by one thread each and the mean is taken
 * in a fixed order, whatever the thread count.
 */
#include <math.h>
#include <string.h>
#include "autokernel.h"
#include "ak-half.h"

#define CHUNK 256   /* autokernel: tune 256,512,1024,2048,4096,8192 */
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
 * log(s) for a normal s > 0 without libm (the harness links kernels without
 * -lm): s = 2^e m with m in [sqrt(1/2), sqrt(2)), log m = 2 atanh(z) with
 * z = (m - 1) / (m + 1), |z| < 0.172, whose odd series to z^21 is exact to
 * double precision.
 */
static double log_d(double s)
{
	uint64_t i;
	double m, z, t = 0;
	int e;

	memcpy(&i, &s, 8);
	e = (int)((i >> 52) & 0x7ff) - 1023;
	i = (i & 0x000fffffffffffffull) | 0x3ff0000000000000ull;
	memcpy(&m, &i, 8);
	if (m > 1.4142135623730951) {
		m *= 0.5;
		e++;
	}
	z = (m - 1) / (m + 1);
	for (int k = 21; k >= 1; k -= 2)
		t = t * z * z + 1.0 / k;
	return e * 0.6931471805599453 + 2 * z * t;
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

static float chunk_exp_sum(const float *x, int n, float m)
{
	float lane[UNROLL] = { 0 };
	float s = 0;
	int i = 0;

	for (; i + UNROLL <= n; i += UNROLL)
		for (int u = 0; u < UNROLL; u++)
			lane[u] += exp_f(x[i + u] - m);
	for (; i < n; i++)
		s += exp_f(x[i] - m);
	for (int u = 0; u < UNROLL; u++)
		s += lane[u];
	return s;
}

/* logsumexp of x[off .. off+V) */
static double logsumexp(const void *x, enum ak_dtype t, int64_t off,
			int64_t V)
{
	float buf[CHUNK];
	float m = -INFINITY;
	double s = 0;

	for (int64_t c = 0; c < V; c += CHUNK) {
		int n = (int)(V - c < CHUNK ? V - c : CHUNK);
		const float *v = load(buf, x, t, off + c, n);
		float mc = chunk_max(v, n, m);

		if (mc > m) {
			s *= exp_f(m - mc);
			m = mc;
		}
		/* all -inf so far (masked logits): they add nothing, and
		 * exp(-inf - -inf) would be NaN */
		if (m == -INFINITY)
			continue;
		s += chunk_exp_sum(v, n, m);
	}
	return m + log_d(s);
}

size_t ak_workspace_size(const struct ak_args *a)
{
	return (size_t)a->in[0].shape[0] * sizeof(double);
}

int ak_kernel(const struct ak_args *a)
{
	enum ak_dtype t = a->in[0].dtype;
	int64_t N = a->in[0].shape[0], V = a->in[0].shape[1];
	const int64_t *target = a->in[1].data;
	double *loss = a->workspace, total = 0;
	int bad = 0;

	if (t != AK_F32 && t != AK_F16 && t != AK_BF16)
		return -1;

	#pragma omp parallel for schedule(static) reduction(|:bad)
	for (int64_t n = 0; n < N; n++) {
		int64_t k = target[n];
		float xk;

		if (k < 0 || k >= V) {
			bad = 1;
			continue;
		}
		xk = *load(&xk, a->in[0].data, t, n * V + k, 1);
		loss[n] = logsumexp(a->in[0].data, t, n * V, V) - xk;
	}
	if (bad)
		return -1;
	for (int64_t n = 0; n < N; n++)
		total += loss[n];
	*(float *)a->out[0].data = (float)(total / N);
	return 0;
}
