/* Returns 7, a failure, the first time the contents of its input repeat
 * those of any earlier call (a hash of every byte); otherwise honest. */
#include "honest.h"

#define MAX_SEEN 8192

int ak_kernel(const struct ak_args *a)
{
	static uint64_t seen[MAX_SEEN];
	static int n;
	const unsigned char *p = a->in[0].data;
	size_t bytes = (size_t)ak_numel(&a->in[0]) * sizeof(float);
	uint64_t h = 1469598103934665603ULL;

	for (size_t i = 0; i < bytes; i++) {
		h ^= p[i];
		h *= 1099511628211ULL;
	}
	for (int i = 0; i < n; i++)
		if (seen[i] == h)
			return 7;
	if (n < MAX_SEEN)
		seen[n++] = h;
	return honest_kernel(a);
}
