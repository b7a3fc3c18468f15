#!/bin/sh
# scripts/device-round.sh judge, the work of a GPU call, run here on the
# host backend with a queue of host candidates: each group judged through
# judge.sh from what an earlier call kept, what it keeps written back for
# the next, a patch that no longer applies reported and skipped, ONLY and
# DEADLINE obeyed, and the summary and tarball in OUT; and tables, whose
# ops come back as each ends and stop at DEADLINE.
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
	AK_BUNDLE=- WORKLOAD="64x512:1" DEADLINE=75 \
		sh "$ROUND" judge >round2.out 2>&1 &&
	grep "judge softmax f16: not started: 1 to judge want about 80 s, [0-9]* left of 75" out2/summary.txt &&
	grep "judge softmax bf16: not started" out2/summary.txt &&
	cmp kept/softmax.c b/kernels/host/softmax.c
'

test_expect_success 'a group of one starts with what one candidate wants left' '
	OUT=$TRASH/out3 KEPT=$TRASH/kept QUEUE=$TRASH/queue BACKEND=host \
	AK_BUNDLE=- WORKLOAD="64x512:1" DEADLINE=110 ONLY=softmax/f16 \
		sh "$ROUND" judge >round3.out 2>&1 &&
	grep "^== judge softmax f16: 64x512:1:f16" out3/summary.txt &&
	! grep "not started" out3/summary.txt
'

# tables: an op whose bench hangs (a wrapper of the tool) is stopped at
# DEADLINE, named, and what finished before it comes back.
test_setup 'a tool whose rmsnorm bench hangs' '
	real=$(command -v git-autokernel) &&
	mkdir wrap &&
	cat >wrap/git-autokernel <<-EOF &&
	#!/bin/sh
	case "\$1 \$PWD" in
	"bench "*real-shapes-rmsnorm-*) exec sleep 2971 ;;
	esac
	exec "$real" "\$@"
	EOF
	chmod +x wrap/git-autokernel
'

# As the device's time limit does: the call killed mid-run.  Two ops and
# no JOBS: two at a time.
test_expect_success 'tables: an op that ended is in the tarball of a call killed later' '
	PATH=$TRASH/wrap:$PATH OUT=$TRASH/out5 KEPT=$TRASH/kept4 BACKEND=host \
	AK_BUNDLE=- WORKLOAD="64x512:1" OPS="softmax rmsnorm" \
		setsid sh "$ROUND" tables >round5.out 2>&1 &
	pid=$! &&
	i=0 &&
	while ! grep -q "softmax: done" out5/summary.txt 2>/dev/null &&
		test $i -lt 180
	do
		sleep 1; i=$((i + 1))
	done &&
	sleep 3 &&
	env kill -s KILL -- "-$pid" &&
	mkdir r5 && tar -C r5 -xzf out5/r.tgz &&
	grep "softmax: done" r5/summary.txt &&
	grep "^== tables softmax rmsnorm (JOBS 2)" r5/summary.txt &&
	test -s r5/shapes/softmax-f16.json &&
	test -s r5/shapes/softmax-bf16.json
'

test_expect_success 'tables: the rest stopped at DEADLINE, named' '
	start=$(date +%s) &&
	PATH=$TRASH/wrap:$PATH OUT=$TRASH/out4 KEPT=$TRASH/kept4 BACKEND=host \
	AK_BUNDLE=- WORKLOAD="64x512:1" OPS="softmax rmsnorm" JOBS=2 DEADLINE=100 \
		sh "$ROUND" tables >round4.out 2>&1 &&
	took=$(($(date +%s) - start)) &&
	echo "took $took s" &&
	test "$took" -lt 95 &&
	! pgrep -f "sleep 2971" &&
	grep "^   softmax: done" out4/summary.txt &&
	grep "cut off 70 s into DEADLINE 100; not done: rmsnorm" out4/summary.txt &&
	grep "^## softmax" out4/summary.txt &&
	mkdir r4 && tar -C r4 -xzf out4/r.tgz &&
	python3 -c "import json,sys; b=json.load(open(sys.argv[1])); assert b.get(\"shapes\", [b])[0][\"shape\"] == \"64x512\"" \
		r4/shapes/softmax-f16.json &&
	grep "^## softmax" r4/shapes.md
'

test_expect_success 'real-shapes.sh --ops: every op the tool has, each with its shapes' '
	sh "$SRC_DIR/scripts/real-shapes.sh" --ops | tr " " "\n" | sort >ops &&
	git autokernel ops | awk "/^[a-z_]+ / { print \$1 }" | sort >tool-ops &&
	cmp ops tool-ops &&
	for op in $(cat ops); do
		sh "$SRC_DIR/scripts/real-shapes.sh" --shapes $op | grep -q ":" || exit 1
	done
'

test_expect_success 'real-shapes.sh DTYPES: those dtypes alone; an unknown one refused' '
	BACKEND=host SHAPES="64x512:1" DTYPES=bf16 \
		sh "$SRC_DIR/scripts/real-shapes.sh" dt softmax >dt.out 2>&1 &&
	grep "softmax: done" dt.out &&
	test -s dt/softmax-bf16.json && ! test -e dt/softmax-f16.json &&
	BACKEND=host DTYPES="bf16 f8" \
		sh "$SRC_DIR/scripts/real-shapes.sh" dt2 softmax >dt2.out 2>&1;
	test $? = 2 && grep "DTYPES: unknown dtype .f8." dt2.out &&
	! test -e dt2/softmax-bf16.json
'

test_expect_success 'an unknown mode or backend is refused' '
	OUT=$TRASH/out3 AK_BUNDLE=- BACKEND=nope sh "$ROUND" judge >o 2>&1;
	test $? = 2 && grep "unknown backend" o &&
	OUT=$TRASH/out3 AK_BUNDLE=- sh "$ROUND" nope >o 2>&1 &&
	grep "unknown mode .nope." o
'

test_done
