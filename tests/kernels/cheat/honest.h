/* The honest f32 softmax the cheating kernels of t0160 wrap, as
 * honest_kernel(); slow_kernel() does its work 30 times. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "autokernel.h"

static int honest_kernel(const struct ak_args *a)
{
	const float *x = a->in[0].data;
	float *y = a->out[0].data;
	int64_t rows = a->in[0].shape[0], cols = a->in[0].shape[1];

	for (int64_t r = 0; r < rows; r++) {
		const float *xr = x + r * cols;
		float *yr = y + r * cols, m = -INFINITY, s = 0;

		for (int64_t c = 0; c < cols; c++)
			m = xr[c] > m ? xr[c] : m;
		for (int64_t c = 0; c < cols; c++)
			s += yr[c] = expf(xr[c] - m);
		for (int64_t c = 0; c < cols; c++)
			yr[c] /= s;
	}
	return 0;
}

static int slow_kernel(const struct ak_args *a)
{
	for (int i = 0; i < 30; i++)
		honest_kernel(a);
	return 0;
}

static size_t out_bytes(const struct ak_args *a)
{
	return (size_t)ak_numel(&a->out[0]) * sizeof(float);
}
