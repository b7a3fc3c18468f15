#!/bin/sh
# scripts/device-round.sh judge, the work of a GPU call, run here on the
# host backend with a queue of host candidates: each group judged through
# judge.sh from what an earlier call kept, what it keeps written back for
# the next, a patch that no longer applies reported and skipped, ONLY and
# DEADLINE obeyed, and the summary and tarball in OUT.
. "$(dirname "$0")/lib.sh"

ROUND=$SRC_DIR/scripts/device-round.sh
STARTER=$SRC_DIR/kernels/host/softmax.c

test_expect_success 'set-up: a slow kept kernel, a queue of host candidates' '
	mkdir kept out &&
	sed "s/^int ak_kernel(/static int once(/" "$STARTER" >kept/softmax.c &&
	cat >>kept/softmax.c <<-\EOF &&
	int ak_kernel(const struct ak_args *a)
	{
		int r = 0;

		for (int i = 0; i < 3 && !r; i++)
			r = once(a);
		return r;
	}
	EOF
	mkdir -p a/kernels/host b/kernels/host &&
	cp "$STARTER" a/kernels/host/ &&
	{ echo "/* the starter, once a call */"; cat "$STARTER"; } >b/kernels/host/softmax.c &&
	{ diff -u a/kernels/host/softmax.c b/kernels/host/softmax.c; test $? = 1; } >once.patch &&
	sed "s/^  \* softmax, host starter/  * softmax, a starter that moved/" once.patch >stale.patch &&
	! cmp -s once.patch stale.patch &&
	cat >queue <<-EOF
	# op dtype patch message
	softmax f16 $TRASH/once.patch the starter again, once a call
	softmax f16 $TRASH/stale.patch a patch whose context moved
	softmax bf16 $TRASH/once.patch the same in bf16 (left out by ONLY)
	EOF
'

test_expect_success 'judge keeps the faster candidate and hands it on' '
	OUT=$TRASH/out KEPT=$TRASH/kept QUEUE=$TRASH/queue BACKEND=host \
	AK_BUNDLE=- WORKLOAD="64x512:1 128x1024:1" ONLY=softmax/f16 \
		sh "$ROUND" judge >round.out 2>&1 &&
	grep "^== judge softmax f16: 64x512:1:f16 128x1024:1:f16" out/summary.txt &&
	grep "from $TRASH/kept/softmax.c (kept earlier)" out/summary.txt &&
	grep "stale.patch not made: .*no longer applies" out/summary.txt &&
	grep "kept: $TRASH/kept/softmax.c" out/summary.txt &&
	! grep "judge softmax bf16" out/summary.txt &&
	cmp kept/softmax.c b/kernels/host/softmax.c
'

test_expect_success 'the tarball holds the candidates, the judge logs, what was kept' '
	mkdir r && tar -C r -xzf out/r.tgz &&
	test -f r/summary.txt &&
	test -f r/judge-softmax-f16/log.txt &&
	test -f r/judge-softmax-f16/report.md &&
	cmp r/kept/softmax.c b/kernels/host/softmax.c &&
	ls r/cand/1-once.c
'

test_expect_success 'with too little of DEADLINE left, no group starts' '
	OUT=$TRASH/out2 KEPT=$TRASH/kept QUEUE=$TRASH/queue BACKEND=host \
	AK_BUNDLE=- WORKLOAD="64x512:1" DEADLINE=100 \
		sh "$ROUND" judge >round2.out 2>&1 &&
	grep "judge softmax f16: not started, under 150 s left of 100" out2/summary.txt &&
	grep "judge softmax bf16: not started" out2/summary.txt &&
	cmp kept/softmax.c b/kernels/host/softmax.c
'

test_expect_success 'an unknown mode or backend is refused' '
	OUT=$TRASH/out3 AK_BUNDLE=- BACKEND=nope sh "$ROUND" judge >o 2>&1;
	test $? = 2 && grep "unknown backend" o &&
	OUT=$TRASH/out3 AK_BUNDLE=- sh "$ROUND" nope >o 2>&1 &&
	grep "unknown mode .nope." o
'

test_done
