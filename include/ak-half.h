/*
 * ak-half.h: f16 and bf16 to and from float, for host kernels (C).
 *
 * Optional: a kernel that wants it includes it beside autokernel.h; it
 * is installed with the tool and found by the same -I, so a kernel that
 * uses it still builds as one file.  Every conversion to a 16-bit type
 * rounds to nearest, ties to even; NaN stays NaN (quiet), infinities
 * stay infinite, subnormals are kept both ways.  No libm, no tables,
 * no branches that stop a loop calling them from vectorizing.
 *
 *	#include "autokernel.h"
 *	#include "ak-half.h"
 *
 *	const uint16_t *x = a->in[0].data;      // AK_F16 (AK_BF16: ak_bf16_*)
 *	uint16_t *y = a->out[0].data;
 *	y[i] = ak_f32_to_f16(2.0f * ak_f16_to_f32(x[i]));
 *
 * GPU kernels use their compiler's types instead (cuda_fp16.h,
 * cuda_bf16.h, hip_fp16.h).
 */
#ifndef AK_HALF_H
#define AK_HALF_H

#include <stdint.h>
#include <string.h>

/* A float's bits and back; memcpy, the one portable way, is a move. */
static inline uint32_t ak_f32_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

static inline float ak_bits_f32(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

/*
 * f16: sign, 5 exponent bits (bias 15), 10 mantissa bits.  Its exponent
 * and mantissa, shifted into a float's places, read as a float 2^112
 * too small: multiplying by 2^112 rebiases the exponent from 15 to 127,
 * and the FPU normalizes a subnormal on the way.
 */
static inline float ak_f16_to_f32(uint16_t h)
{
	uint32_t em = (uint32_t)(h & 0x7fff) << 13;
	uint32_t u = ak_f32_bits(ak_bits_f32(em) * 0x1p112f);

	if ((h & 0x7c00) == 0x7c00)             /* inf, NaN */
		u = em | 0x7f800000u;
	return ak_bits_f32(u | (uint32_t)(h & 0x8000) << 16);
}

static inline uint16_t ak_f32_to_f16(float f)
{
	uint32_t x = ak_f32_bits(f);
	uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
	uint16_t o;

	x &= 0x7fffffffu;
	if (x >= 0x47800000u) {                 /* |f| >= 2^16: inf, NaN */
		o = x > 0x7f800000u ? 0x7e00 : 0x7c00;
	} else if (x < 0x38800000u) {           /* |f| < 2^-14: subnormal */
		/* adding 0.5 leaves |f| in the mantissa's last bits, rounded
		 * by the FPU (ties to even); 0.5's bits are subtracted off */
		o = (uint16_t)(ak_f32_bits(ak_bits_f32(x) + 0.5f) -
			       0x3f000000u);
	} else {
		/* rebias the exponent from 127 to 15 (0xc8000000 is
		 * -(112 << 23)), and add half an f16 ulp less one plus the
		 * ulp's bit: ties to even.  A carry into the exponent is the
		 * right rounding (to inf above 65504). */
		x += 0xc8000fffu + ((x >> 13) & 1);
		o = (uint16_t)(x >> 13);
	}
	return o | sign;
}

/* bf16: a float's top 16 bits. */
static inline float ak_bf16_to_f32(uint16_t b)
{
	return ak_bits_f32((uint32_t)b << 16);
}

static inline uint16_t ak_f32_to_bf16(float f)
{
	uint32_t u = ak_f32_bits(f);

	if ((u & 0x7fffffffu) > 0x7f800000u)    /* NaN: keep it quiet */
		return (uint16_t)((u >> 16) | 0x40);
	u += 0x7fff + ((u >> 16) & 1);          /* ties to even */
	return (uint16_t)(u >> 16);
}

#endif
