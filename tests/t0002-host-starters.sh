#!/bin/sh
# Every host starter passes all five stages at the op's default shapes,
# for f16, bf16 and f32.
. "$(dirname "$0")/lib.sh"

for op in matmul softmax layernorm rmsnorm cross_entropy reduce \
	  rotary_embedding flash_attention fused_mlp; do
	test_expect_success "host starter $op passes all five stages" "
		mkdir -p $op &&
		git autokernel ops $op --problem >$op/problem.json &&
		cp '$SRC_DIR/kernels/host/$op.c' $op/kernel.c &&
		git autokernel verify $op >out-$op &&
		grep 'pass 5/5' out-$op
	"
done

test_done
