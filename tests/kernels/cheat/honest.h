/* What the cheating kernels of t0160 and t0170 wrap: honest_kernel(),
 * tests/kernels/softmax-f32.c with its ak_kernel renamed, goes before
 * this (honest_h in tests/lib.sh); slow_kernel() does its work 30 times. */
#include <stdlib.h>
#include <string.h>

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
