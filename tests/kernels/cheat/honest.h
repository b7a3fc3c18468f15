/* What the cheating kernels of t0160 and t0170 wrap: honest_kernel(),
 * tests/kernels/softmax-f32.c with its ak_kernel renamed, goes before
 * this (honest_h in tests/lib.sh); slow_kernel() does its work 30 times,
 * thirds_of_work() thirds/3 times (4: 1.33x). */
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

static void thirds_of_work(const struct ak_args *a, int thirds)
{
	struct ak_tensor in = a->in[0], out = a->out[0];
	struct ak_args b = *a;

	for (; thirds >= 3; thirds -= 3)
		honest_kernel(a);
	in.shape[0] = out.shape[0] = a->in[0].shape[0] * thirds / 3;
	b.in = &in;
	b.out = &out;
	if (in.shape[0])
		honest_kernel(&b);
}
