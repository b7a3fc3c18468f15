/* A plain f32 softmax for the tests: each variant in
 * t0010-verify-bad-kernels.sh breaks it in one way (at BREAK), and the
 * cheats of tests/kernels/cheat wrap it (honest_h in tests/lib.sh). */
#include <math.h>
#include "autokernel.h"

int ak_kernel(const struct ak_args *a)
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
	/* BREAK */
	return 0;
}
