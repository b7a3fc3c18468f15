/*
 * dtype.c: element types and their conversions.
 *
 * Rounding to f16 and bf16 is done in one place, from a double, by bit
 * arithmetic: rounding a double to float first and then to half can differ
 * from rounding it once (the float rounding can create a tie), so every
 * narrowing conversion goes straight from the double.  A float converts to
 * a double exactly, so the float entry points share the same code.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "ops/dtype.h"

static float f16_table[65536];
static int tables_ready;

static uint64_t f64_bits(double d)
{
	uint64_t x;

	memcpy(&x, &d, sizeof(x));
	return x;
}

static float f32_from_bits(uint32_t x)
{
	float f;

	memcpy(&f, &x, sizeof(f));
	return f;
}

/* Shifts m right by shift (1..63), rounding to nearest, ties to even. */
static uint64_t shift_rne(uint64_t m, int shift)
{
	uint64_t q = m >> shift;
	uint64_t rem = m & ((UINT64_C(1) << shift) - 1);
	uint64_t half = UINT64_C(1) << (shift - 1);

	if (rem > half || (rem == half && (q & 1)))
		q++;
	return q;
}

/*
 * Rounds d to the binary format with mbits stored mantissa bits and ebits
 * exponent bits, ties to even, and returns its bits.  A carry out
 * of the mantissa moves into the exponent field, which is what the encoding
 * needs (largest subnormal -> smallest normal, largest finite -> infinity).
 */
static inline uint32_t round_to(double d, int mbits, int ebits)
{
	uint64_t x = f64_bits(d);
	uint32_t sign = (uint32_t)(x >> 63) << (mbits + ebits);
	uint64_t absx = x & ~(UINT64_C(1) << 63);
	uint32_t emax_field = (1u << ebits) - 1;
	int bias = (1 << (ebits - 1)) - 1;
	int e = (int)(absx >> 52) - 1023;      /* unbiased; double subnormals
						  are far below any target */
	uint64_t m = (absx & ((UINT64_C(1) << 52) - 1)) | (UINT64_C(1) << 52);
	uint64_t q;

	if ((absx >> 52) == 0x7ff) {
		uint32_t out = sign | (emax_field << mbits);

		if (absx & ((UINT64_C(1) << 52) - 1)) {
			/* NaN: keep the top payload bits, set the quiet bit */
			out |= (uint32_t)(absx >> (52 - mbits)) &
			       ((1u << mbits) - 1);
			out |= 1u << (mbits - 1);
		}
		return out;
	}
	if (e > bias)   /* at least twice the largest finite value */
		return sign | (emax_field << mbits);
	if (e >= 1 - bias) {
		/* normal: rebias the exponent and drop mantissa bits */
		uint64_t r = absx - ((uint64_t)(1023 - bias) << 52);

		q = shift_rne(r, 52 - mbits);
	} else {
		/* subnormal: units of 2^(1 - bias - mbits) */
		int shift = 52 - mbits + (1 - bias - e);

		if (shift > 63)
			return sign;
		q = shift_rne(m, shift);
	}
	if (q > ((uint64_t)emax_field << mbits))
		q = (uint64_t)emax_field << mbits;
	return sign | (uint32_t)q;
}

static uint16_t f64_to_f16(double d)
{
	return (uint16_t)round_to(d, 10, 5);
}

static uint16_t f64_to_bf16(double d)
{
	return (uint16_t)round_to(d, 7, 8);
}

uint16_t f32_to_f16(float f)
{
	return f64_to_f16((double)f);
}

uint16_t f32_to_bf16(float f)
{
	return f64_to_bf16((double)f);
}

float f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t e = (h >> 10) & 0x1f;
	uint32_t man = h & 0x3ff;
	float v;

	if (e == 0x1f)  /* inf, or NaN made quiet */
		return f32_from_bits(sign | 0x7f800000 | (man << 13) |
				     (man ? 0x400000 : 0));
	if (e == 0) {
		v = (float)man * 0x1p-24f;      /* exact: 10 bits */
		return sign ? -v : v;
	}
	return f32_from_bits(sign | ((e + 112) << 23) | (man << 13));
}

float bf16_to_f32(uint16_t h)
{
	uint32_t x = (uint32_t)h << 16;

	if ((x & 0x7f800000) == 0x7f800000 && (x & 0x7fffff))
		x |= 0x400000;
	return f32_from_bits(x);
}

void dtype_init(void)
{
	if (tables_ready)
		return;
	for (uint32_t i = 0; i < 65536; i++)
		f16_table[i] = f16_to_f32((uint16_t)i);
	tables_ready = 1;
}

size_t dtype_size(enum ak_dtype t)
{
	return ak_dtype_size(t);
}

static const char *const names[] = {
	[AK_F16] = "f16", [AK_BF16] = "bf16", [AK_F32] = "f32",
	[AK_F64] = "f64", [AK_I32] = "i32", [AK_I64] = "i64",
};

const char *dtype_name(enum ak_dtype t)
{
	if ((unsigned)t >= sizeof(names) / sizeof(names[0]))
		return "unknown";
	return names[t];
}

static const struct {
	const char *name;
	enum ak_dtype t;
} aliases[] = {
	{ "fp16", AK_F16 }, { "float16", AK_F16 }, { "half", AK_F16 },
	{ "bfloat16", AK_BF16 }, { "fp32", AK_F32 }, { "float32", AK_F32 },
	{ "float", AK_F32 }, { "fp64", AK_F64 }, { "float64", AK_F64 },
	{ "double", AK_F64 }, { "int32", AK_I32 }, { "int64", AK_I64 },
};

int dtype_parse(const char *s, enum ak_dtype *out)
{
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (!strcmp(s, names[i])) {
			*out = (enum ak_dtype)i;
			return 0;
		}
	}
	for (i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++) {
		if (!strcmp(s, aliases[i].name)) {
			*out = aliases[i].t;
			return 0;
		}
	}
	return -1;
}

double dtype_load(enum ak_dtype t, const void *base, int64_t i)
{
	switch (t) {
	case AK_F16: {
		uint16_t h = ((const uint16_t *)base)[i];

		return tables_ready ? f16_table[h] : f16_to_f32(h);
	}
	case AK_BF16:
		return bf16_to_f32(((const uint16_t *)base)[i]);
	case AK_F32:
		return ((const float *)base)[i];
	case AK_F64:
		return ((const double *)base)[i];
	case AK_I32:
		return ((const int32_t *)base)[i];
	case AK_I64:
		return (double)((const int64_t *)base)[i];
	}
	return NAN;
}

void dtype_load_span(enum ak_dtype t, const void *base, int64_t i,
		     int64_t n, double *dst)
{
	int64_t k;

	switch (t) {
	case AK_F16: {
		const uint16_t *p = (const uint16_t *)base + i;

		for (k = 0; k < n; k++)
			dst[k] = tables_ready ? f16_table[p[k]] :
				 f16_to_f32(p[k]);
		return;
	}
	case AK_BF16: {
		const uint16_t *p = (const uint16_t *)base + i;

		for (k = 0; k < n; k++)
			dst[k] = bf16_to_f32(p[k]);
		return;
	}
	case AK_F32: {
		const float *p = (const float *)base + i;

		for (k = 0; k < n; k++)
			dst[k] = p[k];
		return;
	}
	default:
		for (k = 0; k < n; k++)
			dst[k] = dtype_load(t, base, i + k);
	}
}

/* Truncates toward zero, saturating; NaN stores 0. */
static int64_t to_int(double v, double lo, double hi)
{
	if (isnan(v))
		return 0;
	if (v <= lo)
		return (int64_t)lo;
	if (v >= hi)
		return (int64_t)hi;
	return (int64_t)v;
}

void dtype_store(enum ak_dtype t, void *base, int64_t i, double v)
{
	switch (t) {
	case AK_F16:
		((uint16_t *)base)[i] = f64_to_f16(v);
		return;
	case AK_BF16:
		((uint16_t *)base)[i] = f64_to_bf16(v);
		return;
	case AK_F32:
		((float *)base)[i] = (float)v;
		return;
	case AK_F64:
		((double *)base)[i] = v;
		return;
	case AK_I32:
		((int32_t *)base)[i] = (int32_t)to_int(v, INT32_MIN,
						      INT32_MAX);
		return;
	case AK_I64:
		/* 2^63 is the first double above INT64_MAX */
		((int64_t *)base)[i] = (v >= 0x1p63) ? INT64_MAX :
			to_int(v, -0x1p63, 0x1p63);
		return;
	}
}

double dtype_max(enum ak_dtype t)
{
	switch (t) {
	case AK_F16:
		return 65504.0;
	case AK_BF16:
		return 0x1.fep127;
	case AK_F32:
		return FLT_MAX;
	case AK_F64:
		return DBL_MAX;
	case AK_I32:
		return INT32_MAX;
	case AK_I64:
		return 0x1p63;
	}
	return 0;
}
