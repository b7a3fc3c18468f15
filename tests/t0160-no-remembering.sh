#!/bin/sh
# No kernel can win by remembering: every timed call gets inputs made
# afresh, every timed call's output is checked on rows chosen after it,
# and a candidate ten times faster than the best is judged again.  Each
# cheat below would have looked faster than the honest baseline against
# inputs that repeat; each is rejected, and an honest faster kernel kept.
. "$(dirname "$0")/lib.sh"

K="$TEST_DIR/kernels/cheat"
small_problem softmax | sed -e 's/"f16", "bf16", "f32"/"f32"/' >small.json
# cheat NAME: one file, the honest softmax and the cheat around it
cheat () {
	{ honest_h; grep -v '#include "honest.h"' "$K/$1.c"; } >"$1.c"
}
for c in replay-pointer replay-content coast some-rows tripwire; do
	cheat $c
done
{ honest_h; printf 'int ak_kernel(const struct ak_args *a)\n{\n\treturn honest_kernel(a);\n}\n'; } >honest.c
{ honest_h; printf 'int ak_kernel(const struct ak_args *a)\n{\n\treturn slow_kernel(a);\n}\n'; } >slow.c

test_setup 'a branch whose best is the honest kernel' '
	new_repo repo && cd repo &&
	git autokernel start softmax --backend host --from ../honest.c \
		--problem ../small.json >/dev/null 2>&1 && cd ..
'

# try NAME: commit the cheat; it must be rejected; its verdict in err
try () {
	cp "../$1.c" softmax/kernel.c &&
	test_must_fail git commit -q -am "$1" 2>"../$1.err" &&
	grep "rejected" "../$1.err" &&
	git diff --quiet HEAD
}

test_expect_success 'replaying outputs by input pointer is caught in a timed call' '
	cd repo && try replay-pointer &&
	grep "wrong output of a timed call [0-9]* (kernel 0)" ../replay-pointer.err
'

test_expect_success 'replaying outputs by a hash of the inputs never pays' '
	cd repo && try replay-content &&
	grep "slower\|not faster" ../replay-content.err
'

test_expect_success 'a kernel that stops writing after the stages is caught' '
	cd repo && try coast &&
	grep "wrong output of a timed call" ../coast.err &&
	grep "not written (still poisoned)" ../coast.err
'

test_expect_success 'a kernel that computes only the first and last rows is caught' '
	cd repo && try some-rows &&
	grep "wrong output of a timed call" ../some-rows.err
'

test_expect_success 'the rejections say integrity, and log shows it' '
	cd repo && git autokernel log --attempts >../log &&
	test $(grep -c "integrity" ../log) -ge 3
'

test_expect_success 'no two calls of a benchmark see the same input contents' '
	cd repo && cp ../tripwire.c softmax/kernel.c &&
	git autokernel bench --json >../bench.json 2>../bench.err &&
	! grep "returned" ../bench.err &&
	python3 -c "import json; b = json.load(open(\"../bench.json\")); \
		assert b[\"checked\"][\"calls\"] > 15, b" &&
	{ git autokernel bench --against HEAD >../ab.out 2>../ab.err; test $? -le 1; } &&
	grep "ratio" ../ab.out && ! grep "returned" ../ab.err
	rc=$?; git checkout -q HEAD -- softmax/kernel.c; return $rc
'

test_setup 'a branch whose best is thirty times slower' '
	cd repo && git checkout -q main &&
	git autokernel start softmax --name slow --backend host --from ../slow.c \
		--problem ../small.json >/dev/null 2>&1 && cd ..
'

test_expect_success 'an honest kernel thirty times faster is judged again, then kept' '
	cd repo && cp ../honest.c slow/kernel.c &&
	git commit -q -am "do the work once" 2>../err &&
	grep "faster than HEAD: judged again by a fresh runner" ../err &&
	git notes --ref=autokernel show HEAD >../note &&
	grep "\"rejudged\"" ../note && grep "\"status\": \"kept\"" ../note &&
	python3 - <<-\EOF
	import json
	# the second run times every call it is given: no shape settles early
	for s in json.load(open("../note"))["workload"]["shapes"]:
	    assert s["checked"]["settled"] is False, s["checked"]
	EOF
'

test_expect_success 'the cheats are rejected against the slow best too' '
	cd repo && cp ../coast.c slow/kernel.c &&
	test_must_fail git commit -q -am "coast" 2>../err &&
	grep "wrong output of a timed call" ../err &&
	git checkout -q HEAD -- slow/kernel.c
'

test_done
