/*
 * matmul, host starter: C[M,N] = A[M,K] B[K,N], accumulated in float.
 *
 * f16/bf16 inputs are first converted to float in the workspace (once, O(MK
 * + KN)), f32 inputs are read in place.  C is cut into TILE_M x TILE_N tiles,
 * one OpenMP task each, accumulated in a float tile on the stack over K in
 * slices of TILE_K, and rounded once to the output dtype.  Inside a slice the
 * loop is i-k-j: ROWS rows of A share every vector load of a row of B, and
 * the j loop runs over contiguous memory, so the compiler vectorizes it.
 * Why it should be fast: the B slice (TILE_K x TILE_N) stays in L1/L2 while
 * all the rows of the tile stream over it.  What it leaves: no packing of
 * B into panels, no register-blocked micro-kernel.
 *
 * Deterministic: every element of C is summed in the same k order by one
 * thread, whatever the thread count.
 */
#include <string.h>
#include "autokernel.h"
#include "ak-half.h"

#define TILE_M 32   /* autokernel: tune 16,32,64,128 */
#define TILE_N 16 /* autokernel: tune 16,32,64,128,256 if TILE_M*TILE_N<=8192 */
#define TILE_K 64   /* autokernel: tune 32,64,128,256,512 */
#define ROWS 1      /* autokernel: tune 1,2,4,8 if ROWS <= TILE_M */

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

static void from_float(void *dst, const float *src, enum ak_dtype t, int64_t n)
{
	uint16_t *h = dst;

	if (t == AK_F32)
		memcpy(dst, src, (size_t)n * sizeof(float));
	else if (t == AK_F16)
		for (int64_t i = 0; i < n; i++)
			h[i] = ak_f32_to_f16(src[i]);
	else
		for (int64_t i = 0; i < n; i++)
			h[i] = ak_f32_to_bf16(src[i]);
}

size_t ak_workspace_size(const struct ak_args *a)
{
	if (a->in[0].dtype == AK_F32)
		return 0;
	return (size_t)(ak_numel(&a->in[0]) + ak_numel(&a->in[1])) *
	       sizeof(float);
}

/* Converts a [rows, cols] f16/bf16 matrix to float, in parallel by rows. */
static void convert(float *dst, const void *src, enum ak_dtype t,
		    int64_t rows, int64_t cols)
{
	size_t es = 2;

	#pragma omp parallel for schedule(static)
	for (int64_t r = 0; r < rows; r++)
		to_float(dst + r * cols, (const char *)src + r * cols * es, t,
			 cols);
}

/* acc[mt][TILE_N] += A[i0.., k0..k0+kt] B[k0.., j0..j0+nt] */
static void tile_slice(float *restrict acc, const float *restrict A,
		       const float *restrict B, int64_t K, int64_t N,
		       int mt, int nt, int kt)
{
	int i = 0;

	for (; i + ROWS <= mt; i += ROWS) {
		float *c = acc + i * TILE_N;

		for (int k = 0; k < kt; k++) {
			const float *b = B + k * N;
			float av[ROWS];

			for (int r = 0; r < ROWS; r++)
				av[r] = A[(i + r) * K + k];
			for (int j = 0; j < nt; j++)
				for (int r = 0; r < ROWS; r++)
					c[r * TILE_N + j] += av[r] * b[j];
		}
	}
	for (; i < mt; i++)
		for (int k = 0; k < kt; k++) {
			float av = A[i * K + k];
			const float *b = B + k * N;

			for (int j = 0; j < nt; j++)
				acc[i * TILE_N + j] += av * b[j];
		}
}

/* The tile of C at (i0, j0): summed in float over K, rounded to t once. */
static void matmul_tile(void *C, enum ak_dtype t, const float *A,
			const float *B, int64_t M, int64_t N, int64_t K,
			int64_t i0, int64_t j0)
{
	float acc[TILE_M * TILE_N];
	int mt = (int)(M - i0 < TILE_M ? M - i0 : TILE_M);
	int nt = (int)(N - j0 < TILE_N ? N - j0 : TILE_N);
	size_t es = t == AK_F32 ? 4 : 2;

	memset(acc, 0, sizeof(acc));
	for (int64_t k0 = 0; k0 < K; k0 += TILE_K) {
		int kt = (int)(K - k0 < TILE_K ? K - k0 : TILE_K);

		tile_slice(acc, A + i0 * K + k0, B + k0 * N + j0, K, N, mt,
			   nt, kt);
	}
	for (int i = 0; i < mt; i++)
		from_float((char *)C + ((i0 + i) * N + j0) * es,
			   acc + i * TILE_N, t, nt);
}

int ak_kernel(const struct ak_args *a)
{
	enum ak_dtype t = a->in[0].dtype;
	int64_t M = a->in[0].shape[0], K = a->in[0].shape[1];
	int64_t N = a->in[1].shape[1];
	const float *A = a->in[0].data, *B = a->in[1].data;
	int64_t tm = (M + TILE_M - 1) / TILE_M, tn = (N + TILE_N - 1) / TILE_N;

	if (t != AK_F32 && t != AK_F16 && t != AK_BF16)
		return -1;
	if (t != AK_F32) {
		float *w = a->workspace;

		convert(w, a->in[0].data, t, M, K);
		convert(w + M * K, a->in[1].data, t, K, N);
		A = w;
		B = w + M * K;
	}

	#pragma omp parallel for collapse(2) schedule(static)
	for (int64_t ti = 0; ti < tm; ti++)
		for (int64_t tj = 0; tj < tn; tj++)
			matmul_tile(a->out[0].data, t, A, B, M, N, K,
				    ti * TILE_M, tj * TILE_N);
	return 0;
}
