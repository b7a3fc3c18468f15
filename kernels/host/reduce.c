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

#define CHUNK 256   /* autokernel: tune 256,512,1024,2048,4096 */
#define UNROLL 4    /* autokernel: tune 1,4,8,16,32,64 */

/* f16 / bf16 <-> float by hand: round to nearest even, NaN stays NaN. */
static inline float bits_f(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static inline uint32_t f_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

static inline float half_to_float(uint16_t h)
{
	uint32_t em = (uint32_t)(h & 0x7fff) << 13;
	/* x 2^112 rebiases the exponent 15 -> 127, subnormals included */
	uint32_t u = f_bits(bits_f(em) * 0x1p112f);

	if ((h & 0x7c00) == 0x7c00)
		u = em | 0x7f800000u;   /* inf, NaN */
	return bits_f(u | (uint32_t)(h & 0x8000) << 16);
}

static inline uint16_t float_to_half(float f)
{
	uint32_t x = f_bits(f);
	uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
	uint16_t o;

	x &= 0x7fffffffu;
	if (x >= 0x47800000u) {                 /* >= 65536, inf, NaN */
		o = x > 0x7f800000u ? 0x7e00 : 0x7c00;
	} else if (x < 0x38800000u) {           /* below 2^-14: subnormal */
		/* adding 0.5 makes the FPU round the mantissa, ties to even */
		o = (uint16_t)(f_bits(bits_f(x) + 0.5f) - 0x3f000000u);
	} else {
		x += 0xc8000fffu + ((x >> 13) & 1);     /* rebias, ties even */
		o = (uint16_t)(x >> 13);
	}
	return o | sign;
}

static inline float bf16_to_float(uint16_t b)
{
	return bits_f((uint32_t)b << 16);
}

static inline uint16_t float_to_bf16(float f)
{
	uint32_t u = f_bits(f);

	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40);    /* quiet NaN */
	u += 0x7fff + ((u >> 16) & 1);
	return (uint16_t)(u >> 16);
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
			buf[i] = half_to_float(h[i]);
	else
		for (int i = 0; i < n; i++)
			buf[i] = bf16_to_float(h[i]);
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
			h[i] = float_to_half(src[i]);
	else
		for (int i = 0; i < n; i++)
			h[i] = float_to_bf16(src[i]);
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
