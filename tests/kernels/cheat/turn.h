/* A bias of the runner's schedule, for t0162: a count of the kernel calls
 * of the runner process, shared by every kernel loaded in it through its
 * environment, so that second_in_round() is 1 on every other call: on
 * whichever kernel a round times second, as an order effect on a device
 * would fall.  Goes after honest_h. */
#include <stdio.h>

static int second_in_round(void)
{
	const char *v = getenv("AK_TEST_KERNEL_CALLS");
	long n = v ? atol(v) : 0;
	char buf[32];

	snprintf(buf, sizeof(buf), "%ld", n + 1);
	setenv("AK_TEST_KERNEL_CALLS", buf, 1);
	return n & 1;
}
