/*
 * unit-keep.c: the keep rule (verify.c, bench_keep(), workload_keep()) on
 * bench results made by hand, in TAP: what is kept, what is within the
 * noise, what is slower, the loaded-machine case where the best's
 * timings spread over milliseconds, and a workload's shape that
 * regressed.
 */
#include <stdio.h>
#include <string.h>
#include "tests/tap.h"
#include "verify/verify.h"

/* A bench result of the candidate and the best: median, q1, q3; n each. */
static json_t *timings(double ma, double a1, double a3, double mb,
		       double b1, double b3, int n)
{
	return json_pack("{s:[{s:f,s:f,s:f,s:i},{s:f,s:f,s:f,s:i}]}",
			 "kernels", "median_us", ma, "q1_us", a1, "q3_us", a3,
			 "n", n, "median_us", mb, "q1_us", b1, "q3_us", b3,
			 "n", n);
}

/* A keep rule's answer k when its reason (why) contains want, else -1;
 * frees why and the results j it judged. */
static int answer(int k, struct strbuf *why, json_t *j, const char *want)
{
	printf("# %s\n", why->buf);
	if (!strstr(why->buf, want))
		k = -1;
	strbuf_release(why);
	json_decref(j);
	return k;
}

/* bench_keep()'s answer when its reason contains want, else -1. */
static int keep(json_t *bench, const char *want)
{
	struct strbuf why = STRBUF_INIT;
	int k = bench_keep(bench, 0.01, &why);

	return answer(k, &why, bench, want);
}

/* A two-shape workload 5x faster in its weighted total (shape 0, with
 * the weight): shape 1 the candidate's timings a1..a3 against the best's
 * b1..b3 (medians in the middle). */
static json_t *workload(double a1, double a3, double b1, double b3, int n)
{
	json_t *s0 = timings(1000, 990, 1010, 5000, 4950, 5050, 400);
	json_t *s1 = timings((a1 + a3) / 2, a1, a3, (b1 + b3) / 2, b1, b3, n);

	json_object_set_new(s0, "shape", json_string("64x4096"));
	json_object_set_new(s1, "shape", json_string("2048x64"));
	return json_pack("{s:{s:f,s:f,s:f,s:b},s:[o,o]}", "total",
			 "candidate_us", 1000.0, "best_us", 5000.0, "noise_us",
			 20.0, "apart", 1, "shapes", s0, s1);
}

/* workload_keep()'s answer when its reason contains want, else -1. */
static int wl_keep(json_t *wl, const char *want)
{
	struct strbuf why = STRBUF_INIT;
	int k = workload_keep(wl, 0.01, 0, &why);

	return answer(k, &why, wl, want);
}

int main(void)
{
	ok(keep(timings(90, 89, 91, 100, 99, 101, 400),
		"faster: 90.00 us vs 100.00 us") == 1,
	   "10%% faster with tight timings is kept");
	ok(keep(timings(99.9, 95, 105, 100, 95, 105, 20),
		"within the noise") == 0,
	   "a gain inside overlapping timings is not kept");
	ok(keep(timings(110, 109, 111, 100, 99, 101, 400),
		"slower: 110.00 us vs 100.00 us") == 0,
	   "slower is rejected");
	ok(keep(timings(99.7, 99.6, 99.8, 100, 99.9, 100.1, 4000),
		"under autokernel.minGain") == 0,
	   "beyond the noise but under minGain is not kept");
	ok(keep(timings(95, 80, 300, 1722, 900, 12000, 15),
		"the middle halves of the timings do not overlap") == 1,
	   "18x faster is kept though preempted calls spread the best's "
	   "timings over milliseconds");
	ok(keep(timings(95, 80, 1000, 1722, 900, 12000, 15),
		"within the noise") == 0,
	   "spread timings that overlap are still not kept");
	ok(keep(timings(0, 0, 0, 100, 99, 101, 10), "no timing") == 0,
	   "no timing, no keep");
	ok(wl_keep(workload(99, 101, 99.5, 101.5, 400), "faster: ") == 1,
	   "a workload faster at one shape and level at the other is kept");
	ok(wl_keep(workload(1200, 1800, 400, 550, 400), "slower at 2048x64") == 0,
	   "3x slower at a shape is rejected there with tight timings");
	ok(wl_keep(workload(900, 20000, 300, 800, 12), "slower at 2048x64") == 0,
	   "and with its middle halves apart, though preempted calls spread "
	   "them past the standard error's reach");
	ok(wl_keep(workload(400, 20000, 300, 800, 12), "faster: ") == 1,
	   "spread timings that overlap the best's do not fail a shape");
	return tap_done();
}
