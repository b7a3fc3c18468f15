#!/bin/sh
# The candidates waiting for a device (scripts/candidates/queue) stay
# judgeable: each line names a known op and dtype, its patch still applies
# to its starter and sets only tunables the file declares, and, where nvcc
# exists, the kernel it makes builds.  And scripts/candidate.sh refuses
# what it cannot make, saying why.
. "$(dirname "$0")/lib.sh"

CAND=$SRC_DIR/scripts/candidate.sh
QUEUE=$SRC_DIR/scripts/candidates/queue
have_nvcc () {
	command -v nvcc >/dev/null || test -x /usr/local/cuda/bin/nvcc
}

# An empty queue is fine: every candidate judged.
test_setup 'the queue lines' '
	grep -v "^[[:space:]]*\(#\|\$\)" "$QUEUE" >lines || test $? = 1
'

git autokernel ops >ops.txt 2>&1
n=0
while read -r op dt spec msg <&3; do
	n=$((n + 1))
	patch=$SRC_DIR/scripts/candidates/${spec%%:*}
	test_expect_success "queue line $n: $spec ($op, $dt) names an op and dtype, says why" '
		grep -q "^$op\b" ops.txt &&
		case $dt in f16 | bf16 | f32) ;; *) false ;; esac &&
		test -n "$msg"
	'
	test_expect_success "queue line $n: $spec applies to its starter" '
		sh "$CAND" "$spec" cand-$n.cu &&
		grep -q "^+++ b/kernels/cuda/$op\.cu" "$patch" &&
		! cmp -s cand-$n.cu "$SRC_DIR/kernels/cuda/$op.cu"
	'
	if have_nvcc; then
		test_expect_success "queue line $n: $spec builds" '
			mkdir -p b$n/$op &&
			cuda_problem $op >b$n/$op/problem.json &&
			cp cand-$n.cu b$n/$op/kernel.cu &&
			git autokernel verify --build-only b$n/$op
		'
	else
		test_skip "queue line $n: $spec builds" "nvcc not found"
	fi
done 3<lines

# The refusals on a tree of their own (candidate.sh finds the starters
# beside itself), with a patch made here: they hold whatever the queue
# holds.
test_setup 'a tree with a starter and a patch of it' '
	mkdir -p t/scripts/candidates t/kernels/cuda &&
	cp "$CAND" t/scripts/ &&
	cp "$SRC_DIR/kernels/cuda/layernorm.cu" t/kernels/cuda/ &&
	sed "/^#define BLOCK /a #define EXTRA 1 /* autokernel: tune 0,1 */" \
		t/kernels/cuda/layernorm.cu >new.cu &&
	grep -q "^#define EXTRA 1 " new.cu &&
	{
		echo "layernorm: a tunable more" && echo &&
		diff -u --label a/kernels/cuda/layernorm.cu \
			--label b/kernels/cuda/layernorm.cu \
			t/kernels/cuda/layernorm.cu new.cu
		test $? = 1
	} >t/scripts/candidates/extra.patch
'

test_expect_success 'a candidate is its starter with the patch applied' '
	sh t/scripts/candidate.sh extra.patch a.cu &&
	cmp a.cu new.cu
'

test_expect_success 'a setting takes the value given, the rest as patched' '
	sh t/scripts/candidate.sh extra.patch:EXTRA=0,BLOCK=512 c.cu &&
	grep "^#define EXTRA 0 " c.cu &&
	grep "^#define BLOCK 512 " c.cu &&
	test $(diff c.cu new.cu | grep -c "^>") = 2
'

test_expect_success 'a patch whose starter moved is refused, with the reason' '
	sed -i "/^#define BLOCK /d" t/kernels/cuda/layernorm.cu &&
	test_expect_code 1 sh t/scripts/candidate.sh extra.patch x.cu 2>err &&
	grep "no longer applies to kernels/cuda/layernorm.cu" err &&
	! test -e x.cu &&
	cp "$SRC_DIR/kernels/cuda/layernorm.cu" t/kernels/cuda/
'

test_expect_success 'an unknown tunable, a bad setting, a missing patch are refused' '
	test_expect_code 1 sh t/scripts/candidate.sh extra.patch:NOPE=1 x.cu 2>err &&
	grep "NOPE is no tunable" err &&
	test_expect_code 2 sh t/scripts/candidate.sh extra.patch:BLOCK x.cu 2>err &&
	grep "bad setting" err &&
	test_expect_code 2 sh t/scripts/candidate.sh "extra.patch:BLOCK=1;rm" x.cu 2>err &&
	grep "bad setting" err &&
	test_expect_code 2 sh t/scripts/candidate.sh no-such.patch x.cu 2>err &&
	grep "no such patch" err &&
	! test -e x.cu
'

test_done
