/* Honest through the stages, then computes only the first and the last
 * rows, where a check that looked only there would be satisfied. */
#include "honest.h"

int ak_kernel(const struct ak_args *a)
{
	static int calls;
	struct ak_args b = *a;
	struct ak_tensor in = a->in[0], out = a->out[0];

	if (++calls <= 15 || in.shape[0] < 4)
		return honest_kernel(a);
	in.shape[0] = 1;
	out.shape[0] = 1;
	b.in = &in;
	b.out = &out;
	honest_kernel(&b);
	in.data = (float *)a->in[0].data + (a->in[0].shape[0] - 1) *
		a->in[0].shape[1];
	out.data = (float *)a->out[0].data + (a->out[0].shape[0] - 1) *
		a->out[0].shape[1];
	return honest_kernel(&b);
}
