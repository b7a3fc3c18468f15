#!/bin/sh
# The git scenario end to end on the CUDA backend: a faster candidate is
# kept with trailers and a note, a slower one is rejected and kept as an
# attempt, the tuner runs, log tells the story.
. "$(dirname "$0")/../lib.sh"

new_repo repo
cd repo || exit 1

test_expect_success 'start softmax on cuda' '
	git autokernel start softmax --backend cuda --from "$TEST_DIR/kernels/softmax-f32.cu" \
		--dtype f32 >out 2>&1 &&
	git log -1 --format=%B | grep "Autokernel-Backend: cuda"
'

test_expect_success 'a slower candidate is rejected and saved' '
	sed -i "s|/\* HOST_BREAK \*/|for (int i = 0; i < 20; i++) softmax_rows<<<rows, 256, 0, stream>>>(x, y, rows, cols);|" softmax/kernel.cu &&
	git add softmax/kernel.cu &&
	test_must_fail git commit -q -m "twenty times the work" 2>err &&
	grep "rejected" err &&
	git rev-parse --verify refs/autokernel/attempts/softmax/1 &&
	git diff --quiet HEAD -- softmax/kernel.cu
'

test_expect_success 'commit -a judges the work tree (git hands the hook a locked index)' '
	sed -i "s|^#define THREADS 256 |#define THREADS 128 |" softmax/kernel.cu &&
	git commit -q -a -m "128 threads a row" >out 2>&1;
	cat out &&
	grep "judging softmax/kernel.cu" out &&
	! grep "does not change" out
'

test_expect_success 'the tuner runs three experiments on cuda' '
	git reset -q --hard &&
	git autokernel run --agent tune --max-experiments 3 >log.out 2>&1 &&
	git autokernel log --attempts --json >log.json &&
	python3 -c "import json,sys; n=len(json.load(open(\"log.json\"))); print(n); sys.exit(n < 5)"
'

test_done
