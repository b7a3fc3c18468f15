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

test_expect_success 'the queue has candidates' '
	grep -v "^[[:space:]]*\(#\|\$\)" "$QUEUE" >lines &&
	test -s lines
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

test_expect_success 'a setting takes the value given, the rest as patched' '
	sh "$CAND" flash_attention-persist.patch:WS64=1 c.cu &&
	grep "^#define WS64 1 " c.cu &&
	grep "^#define PERSIST 1 " c.cu &&
	sh "$CAND" flash_attention-persist.patch:PERSIST=0 d.cu &&
	grep "^#define PERSIST 0 " d.cu
'

test_expect_success 'a patch whose starter moved is refused, with the reason' '
	mkdir -p moved/scripts/candidates moved/kernels/cuda &&
	cp "$CAND" moved/scripts/ &&
	cp "$SRC_DIR/scripts/candidates/layernorm-bf16-words.patch" \
		moved/scripts/candidates/ &&
	sed "s/^#include <stdint.h>/#include <stdint.h>\n#include <stddef.h>/" \
		"$SRC_DIR/kernels/cuda/layernorm.cu" >moved/kernels/cuda/layernorm.cu &&
	sed -i "/^static __device__ __forceinline__ void load_vec/,+3d" \
		moved/kernels/cuda/layernorm.cu &&
	test_expect_code 1 sh moved/scripts/candidate.sh layernorm-bf16-words.patch x.cu 2>err &&
	grep "no longer applies to kernels/cuda/layernorm.cu" err &&
	! test -e x.cu
'

test_expect_success 'an unknown tunable, a bad setting, a missing patch are refused' '
	test_expect_code 1 sh "$CAND" layernorm-bf16-words.patch:NOPE=1 x.cu 2>err &&
	grep "NOPE is no tunable" err &&
	test_expect_code 2 sh "$CAND" layernorm-bf16-words.patch:BLOCK x.cu 2>err &&
	grep "bad setting" err &&
	test_expect_code 2 sh "$CAND" "layernorm-bf16-words.patch:BLOCK=1;rm" x.cu 2>err &&
	grep "bad setting" err &&
	test_expect_code 2 sh "$CAND" no-such.patch x.cu 2>err &&
	grep "no such patch" err &&
	! test -e x.cu
'

test_done
