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

# rotary_embedding's second layout: rotate_half's pairs (x[i], x[i+D/2])
test_expect_success 'host starter rotary_embedding passes with layout half' '
	mkdir -p half &&
	sed -e "s/\"layout\": \"interleaved\"/\"layout\": \"half\"/" \
		rotary_embedding/problem.json >half/problem.json &&
	grep "\"layout\": \"half\"" half/problem.json &&
	cp "$SRC_DIR/kernels/host/rotary_embedding.c" half/kernel.c &&
	git autokernel verify half >out-half &&
	grep "pass 5/5" out-half
'

test_expect_success 'a kernel of the other layout fails it' '
	cat >half/kernel.c <<-\EOF &&
	#include "autokernel.h"
	#include <string.h>
	/* interleaved only: ignores scalar[0] */
	int ak_kernel(const struct ak_args *a)
	{
		const float *x = a->in[0].data, *c = a->in[1].data;
		const float *s = a->in[2].data;
		float *y = a->out[0].data;
		long S = a->in[0].shape[2], D = a->in[0].shape[3];
		long rows = a->in[0].shape[0] * a->in[0].shape[1] * S;

		if (a->in[0].dtype != AK_F32)
			return -1;
		for (long r = 0; r < rows; r++)
			for (long i = 0; i < D / 2; i++) {
				long t = (r % S) * (D / 2) + i, o = r * D + 2 * i;

				y[o] = x[o] * c[t] - x[o + 1] * s[t];
				y[o + 1] = x[o] * s[t] + x[o + 1] * c[t];
			}
		return 0;
	}
	EOF
	python3 -c "import json; p = json.load(open(\"half/problem.json\")); p[\"dtypes\"] = [\"f32\"]; json.dump(p, open(\"half/problem.json\", \"w\"))" &&
	test_expect_code 1 git autokernel verify half >out-half &&
	grep "FAIL 0/5" out-half
'

test_expect_success 'a layout the op does not have is refused' '
	mkdir -p bad &&
	sed -e "s/\"layout\": \"interleaved\"/\"layout\": \"diagonal\"/" \
		rotary_embedding/problem.json >bad/problem.json &&
	cp "$SRC_DIR/kernels/host/rotary_embedding.c" bad/kernel.c &&
	test_must_fail git autokernel verify bad 2>err &&
	grep "unknown layout .diagonal. for .rotary_embedding. (interleaved, half)" err &&
	python3 -c "import json; p = json.load(open(\"softmax/problem.json\")); p[\"layout\"] = \"half\"; json.dump(p, open(\"bad/problem.json\", \"w\"))" &&
	test_must_fail git autokernel verify bad 2>err &&
	grep "takes no layout" err
'

test_done
