/*
 * dtype.h: element types of the kernel ABI and their conversions.
 *
 * Conversions to f16 and bf16 round to nearest, ties to even, keep NaN a
 * NaN and overflow to infinity, exactly as the hardware's cvt.rn does.
 * Reading a half is a table lookup after dtype_init() (a bfloat16 is a
 * shift); without it the loads still work, only slower.  dtype_init() is
 * not thread-safe: call it once at start-up, before any threads.
 */
#ifndef DTYPE_H
#define DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include "autokernel.h"

/* Fills the conversion tables; call once before dtype_load(). */
void dtype_init(void);

uint16_t f32_to_f16(float f);
uint16_t f32_to_bf16(float f);
float f16_to_f32(uint16_t h);
float bf16_to_f32(uint16_t h);

size_t dtype_size(enum ak_dtype t);
const char *dtype_name(enum ak_dtype t);           /* "f16", "bf16", ... */
int dtype_parse(const char *s, enum ak_dtype *out); /* 0 or -1 */

/* Element i of a buffer of type t, as a double. */
double dtype_load(enum ak_dtype t, const void *base, int64_t i);

/* Elements i .. i+n-1 into dst[0 .. n-1]: dtype_load() over a span, fast. */
void dtype_load_span(enum ak_dtype t, const void *base, int64_t i,
		     int64_t n, double *dst);

/* Stores v, rounded to t (nearest even; integers are truncated toward 0). */
void dtype_store(enum ak_dtype t, void *base, int64_t i, double v);

/* Largest finite value of a floating type (65504 for f16). */
double dtype_max(enum ak_dtype t);

#endif
