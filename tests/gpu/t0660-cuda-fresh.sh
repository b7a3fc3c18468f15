#!/bin/sh
# Fresh data on the GPU: the device's generator makes the bytes the host
# checks against; kernels that remember or coast fail the benchmark; and
# a three-shape workload is judged through the hooks.
. "$(dirname "$0")/../lib.sh"

base="$TEST_DIR/kernels/softmax-f32.cu"

# kernel_dir NAME HOST_REPLACEMENT
kernel_dir () {
	mkdir -p "$1/softmax" &&
	cuda_problem softmax | sed -e 's/"f16", "bf16", "f32"/"f32"/' \
		>"$1/softmax/problem.json" &&
	sed -e "s|/\* HOST_BREAK \*/|$2|" "$base" >"$1/softmax/kernel.cu"
}

# the build's unit tests, or a bundle's (make bundle: tests/ beside bin/)
unit_dir=${AK_UNIT_DIR:-$AK_BUILD/tests}
test -x "$unit_dir/unit-fresh" || unit_dir=$AK_BUILD/../tests

test_expect_success 'the device generator makes the bytes the host checks' '
	AK_FRESH_BACKEND=cuda AUTOKERNEL_LIBEXEC="$AK_LIBEXEC" \
		"$unit_dir/unit-fresh" >out 2>&1;
	cat out; ! grep "^not ok" out && grep "cuda runner makes the host" out
'

test_expect_success 'a kernel that stops writing after 15 calls fails the benchmark' '
	kernel_dir coast "static int calls; if (++calls > 15) return 0;" &&
	test_expect_code 1 git autokernel bench coast/softmax 2>err &&
	grep "wrong output of a timed call" err && grep "not written" err
'

test_expect_success 'a kernel that replays by input pointer fails the benchmark' '
	kernel_dir replay "" &&
	cp "$TEST_DIR/kernels/cheat/replay-pointer.cu" replay/softmax/kernel.cu &&
	git autokernel verify replay/softmax >out && grep "pass 5/5" out &&
	test_expect_code 1 git autokernel bench replay/softmax 2>err &&
	grep "wrong output of a timed call" err
'

test_setup 'a CUDA softmax branch with a three-shape workload' '
	new_repo repo && cd repo &&
	git autokernel start softmax --backend cuda --shape 4096x4096:0.5 \
		--shape 32x50257:0.3 --shape 1x32000:0.2 >../start.out 2>&1;
	cat ../start.out; cd ..
'

test_expect_success 'the baseline and an experiment are judged at the three shapes' '
	cat start.out && cd repo && grep "weighted over 3 shapes" ../start.out &&
	sed -i "s/^#define BLOCK 256 /#define BLOCK 512 /" softmax/kernel.cu &&
	start=$(date +%s%N) &&
	{ git commit -q -am "512 threads a block" 2>../exp.out; :; } &&
	end=$(date +%s%N) &&
	cat ../exp.out &&
	echo "experiment with 3 shapes: $(( (end - start) / 1000000 )) ms" &&
	test $(grep -c "^  bench .* (weight" ../exp.out) = 3 &&
	grep "verdict:" ../exp.out
'

test_done
