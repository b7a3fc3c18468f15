/*
 * ak-wire.h: what the tool and its runners share (doc/runner-protocol.md):
 * the constants of the wire format and the integrity checks, and the
 * benchmark's generator of fresh inputs, written once for C, CUDA and
 * HIP so that the device and the host make the same bytes.
 *
 *	struct ak_gen g = { AK_GEN_NORMAL, 0.0f, 1.0f, 0 };
 *	uint64_t seed = ak_call_seed(base, k);          // call k's seed
 *	uint64_t h = ak_mix(seed, tensor, i);           // element i
 *	float v = ak_gen_normal(h, &g);                 // exact in f32
 *	uint16_t bits = ak_f32_to_f16(v);               // or _bf16
 *
 * A kernel has no use for this header; the harness does.
 */
#ifndef AK_WIRE_H
#define AK_WIRE_H

#include <stdint.h>
#include "autokernel.h"

#if defined(__CUDACC__) || defined(__HIPCC__)
#define AK_HD __host__ __device__
#else
#define AK_HD
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define AK_WIRE_SLOTS 8                 /* kernels loaded at once */
#define AK_WIRE_MAX_TENSORS 8           /* inputs, and outputs, of a call */
#define AK_WIRE_GUARD 4096              /* guard bytes around each buffer */
#define AK_WIRE_GUARD_BYTE 0xA5
#define AK_WIRE_POISON_BYTE 0xFF        /* outputs before a call: NaN */

/* How the benchmark fills one input tensor. */
enum ak_gen_kind {
	AK_GEN_NORMAL,  /* mean + sd * z / 2048, z roughly N(0, 2365^2) */
	AK_GEN_INDEX,   /* an integer in [0, n) */
};

struct ak_gen {
	int kind;
	float mean, sd;         /* NORMAL: sd a power of two */
	int64_t n;              /* INDEX */
};

/* splitmix64's finalizer: every bit of z moves every bit of the result. */
static inline AK_HD uint64_t ak_fin(uint64_t z)
{
	z ^= z >> 30;
	z *= 0xBF58476D1CE4E5B9ULL;
	z ^= z >> 27;
	z *= 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

/* The seed of the benchmark's call k (every call of every kernel). */
static inline AK_HD uint64_t ak_call_seed(uint64_t seed, uint64_t k)
{
	return ak_fin(seed + (k + 1) * 0x9E3779B97F4A7C15ULL);
}

/* The hash of element i of input tensor t under seed. */
static inline AK_HD uint64_t ak_mix(uint64_t seed, int t, uint64_t i)
{
	return ak_fin(seed ^ (0x9E3779B97F4A7C15ULL * (uint64_t)(t + 1)) ^
		      (i * 0xD1B54A32D192ED03ULL));
}

#define AK_GEN_Z 8190      /* |z| at most */

/* The sum of four 12-bit fields of h, centred. */
static inline AK_HD int ak_gen_z(uint64_t h)
{
	return (int)(h & 0xFFF) + (int)((h >> 12) & 0xFFF) +
	       (int)((h >> 24) & 0xFFF) + (int)((h >> 36) & 0xFFF) - AK_GEN_Z;
}

/*
 * z an integer, so the value is exact in f32 (|z| <= 8190, scaled by a
 * power of two, plus a mean that leaves it in 24 bits) and both sides
 * round it to the dtype alike.
 */
static inline AK_HD float ak_gen_value(int z, const struct ak_gen *g)
{
	return (float)z * (g->sd * (1.0f / 2048.0f)) + g->mean;
}

static inline AK_HD float ak_gen_normal(uint64_t h, const struct ak_gen *g)
{
	return ak_gen_value(ak_gen_z(h), g);
}

static inline AK_HD int64_t ak_gen_index(uint64_t h, const struct ak_gen *g)
{
	return (int64_t)(((h >> 32) * (uint64_t)g->n) >> 32);
}

static inline AK_HD uint32_t ak_f32_bits(float f)
{
	union { float f; uint32_t u; } v;

	v.f = f;
	return v.u;
}

/* Rounded to nearest, ties to even; v finite. */
static inline AK_HD uint16_t ak_f32_to_bf16(float f)
{
	uint32_t u = ak_f32_bits(f);

	return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

/* Rounded to nearest, ties to even, subnormals too; v finite. */
static inline AK_HD uint16_t ak_f32_to_f16(float f)
{
	uint32_t x = ak_f32_bits(f), sign = (x >> 16) & 0x8000u;
	uint32_t a = x & 0x7FFFFFFFu, q, rem, half;
	int shift;

	if (a >= 0x477FF000u)                   /* rounds past 65504 */
		return (uint16_t)(sign | 0x7C00u);
	if (a >= 0x38800000u) {                 /* normal: 2^-14 and up */
		a -= 0x38000000u;               /* exponent bias 127 -> 15 */
		q = a >> 13;
		rem = a & 0x1FFFu;
		half = 0x1000u;
	} else {
		if ((a >> 23) < 102)            /* under 2^-25: zero */
			return (uint16_t)sign;
		shift = 126 - (int)(a >> 23);   /* 14 .. 24 */
		a = (a & 0x7FFFFFu) | 0x800000u;
		q = a >> shift;
		rem = a & ((1u << shift) - 1);
		half = 1u << (shift - 1);
	}
	/* without a branch: random data would mispredict half of them */
	q += (uint32_t)(rem > half) | ((uint32_t)(rem == half) & q & 1u);
	return (uint16_t)(sign | q);
}

/* Element i of tensor t of dtype dt, into p (its storage). */
static inline AK_HD void ak_gen_store(void *p, int dt, uint64_t i,
				      uint64_t seed, int t,
				      const struct ak_gen *g)
{
	uint64_t h = ak_mix(seed, t, i);

	if (g->kind == AK_GEN_INDEX) {
		if (dt == AK_I32)
			((int32_t *)p)[i] = (int32_t)ak_gen_index(h, g);
		else
			((int64_t *)p)[i] = ak_gen_index(h, g);
		return;
	}
	switch (dt) {
	case AK_F16:
		((uint16_t *)p)[i] = ak_f32_to_f16(ak_gen_normal(h, g));
		break;
	case AK_BF16:
		((uint16_t *)p)[i] = ak_f32_to_bf16(ak_gen_normal(h, g));
		break;
	case AK_F64:
		((double *)p)[i] = ak_gen_normal(h, g);
		break;
	default:
		((float *)p)[i] = ak_gen_normal(h, g);
		break;
	}
}

/*
 * A normal 16-bit input's bits for every z, table[z + AK_GEN_Z] (dt f16
 * or bf16): its element i under seed is then table[ak_gen_z(ak_mix(seed,
 * t, i)) + AK_GEN_Z], the bits ak_gen_store() writes, without the
 * arithmetic and rounding of each element (the host regenerates whole
 * inputs of a billion elements to check a call).
 */
static inline void ak_gen_table(uint16_t table[2 * AK_GEN_Z + 1], int dt,
				const struct ak_gen *g)
{
	for (int z = -AK_GEN_Z; z <= AK_GEN_Z; z++)
		table[z + AK_GEN_Z] = dt == AK_F16 ?
			ak_f32_to_f16(ak_gen_value(z, g)) :
			ak_f32_to_bf16(ak_gen_value(z, g));
}

#ifdef __cplusplus
}
#endif

#endif /* AK_WIRE_H */
