/*
 * devlock.h: one benchmark on a device at a time.  Several judges on one
 * machine share its devices: the workers of `run --workers`, a `bench`
 * beside a run.  The benchmark's timed section takes the device
 * exclusively; each call of the stages, which run kernels on it too,
 * takes it shared (the host's work between calls holds nothing), so no
 * kernel of one judge runs while another judge times.
 *
 *	struct devlock l = DEVLOCK_INIT;
 *	devlock_take(&l, &j, DEVLOCK_EXCLUSIVE);  // or DEVLOCK_SHARED
 *	rc = bench_slots(&j.r, ...);
 *	devlock_release(&l);                    // l.waited: seconds waited
 *
 * The lock is a flock() of a file named by the device (judge_device_key())
 * in the user's cache, so a process that dies, however, lets it go.  A
 * turnstile, taken exclusively around every acquisition, keeps a waiting
 * benchmark from starving behind a stream of stages: while it waits, no
 * stage's next call starts.  A lock that cannot be made is a warning,
 * and the judge goes on unlocked.
 */
#ifndef JUDGE_DEVLOCK_H
#define JUDGE_DEVLOCK_H

#include "judge/judge.h"

enum devlock_mode { DEVLOCK_SHARED, DEVLOCK_EXCLUSIVE };

struct devlock {
	int fd;
	double waited;          /* seconds devlock_take() waited */
	long long taken;        /* when it was taken (now_ns()), for trace */
	int shared;
};
#define DEVLOCK_INIT { -1, 0, 0, 0 }

/* 0, or -1 after a warning (no lock held). */
int devlock_take(struct devlock *l, struct judge *j, enum devlock_mode mode);
void devlock_release(struct devlock *l);

#endif
