#!/bin/sh
# The integrity checks on the CUDA backend: guard bands, input checks,
# poisoned outputs, hangs, illegal addresses, kernels on their own stream.
. "$(dirname "$0")/../lib.sh"

base="$TEST_DIR/kernels/softmax-f32.cu"

# kernel_dir NAME HOST_REPLACEMENT DEVICE_REPLACEMENT
kernel_dir () {
	mkdir -p "$1/softmax" &&
	cuda_problem softmax | sed -e 's/"f16", "bf16", "f32"/"f32"/' \
		>"$1/softmax/problem.json" &&
	sed -e "s|/\* HOST_BREAK \*/|$2|" -e "s|/\* DEVICE_BREAK \*/|$3|" \
		"$base" >"$1/softmax/kernel.cu"
}

test_expect_success 'a correct CUDA kernel passes all five stages' '
	kernel_dir good "" "" &&
	git autokernel verify good/softmax >out &&
	grep "pass 5/5" out
'

test_expect_success 'bench times it beside a copy of the same bytes' '
	git autokernel bench --json good/softmax >b.json &&
	python3 -c "import json; b=json.load(open(\"b.json\")); \
		k=b[\"kernels\"][0]; assert k[\"median_us\"] > 0 and \
		b[\"copy\"][\"median_us\"] > 0, b"
'

test_expect_success 'a kernel on a stream of its own is timed and checked' '
	kernel_dir own "cudaStreamCreate(\&stream);" "" &&
	git autokernel verify own/softmax >out &&
	grep "pass 5/5" out
'

test_expect_success 'a kernel that launches nothing writes nothing' '
	kernel_dir nothing "return 0;" "" &&
	test_expect_code 1 git autokernel verify nothing/softmax >out &&
	grep "not written" out
'

test_expect_success 'a write past the output is caught by the guard band' '
	kernel_dir oob "" "if (r == rows - 1 \&\& threadIdx.x == 0) yr[cols] = 1;" &&
	test_expect_code 1 git autokernel verify oob/softmax >out &&
	grep "wrote outside output 0: 1 bytes after the end" out
'

test_expect_success 'a write into the input is caught' '
	kernel_dir scribble "" "__syncthreads(); if (threadIdx.x == 0) ((float *)xr)[0] = 0;" &&
	test_expect_code 1 git autokernel verify scribble/softmax >out &&
	grep "modified input 0" out
'

test_expect_success 'an illegal address is a verdict, and the next case runs' '
	kernel_dir illegal "" "if (r == 0) *(volatile float *)16 = 1;" &&
	test_expect_code 1 git autokernel verify illegal/softmax >out &&
	grep -i "illegal" out
'

test_expect_success 'an infinite loop is killed at the time limit' '
	kernel_dir hang "" "if (r == 0) while (*(volatile float *)xr == *(volatile float *)xr) ;" &&
	AUTOKERNEL_TIMEOUT=3 test_expect_code 1 \
		git autokernel verify hang/softmax >out &&
	grep "timed out after 3.0 s" out
'

test_expect_success 'a launch error is reported' '
	kernel_dir launch "softmax_rows<<<rows, 4096, 0, stream>>>(x, y, rows, cols);" "" &&
	test_expect_code 1 git autokernel verify launch/softmax >out &&
	grep -E "returned 1|invalid" out
'

test_expect_success 'a nondeterministic kernel fails stage 4' '
	kernel_dir nondet "" "if (r == 0 \&\& threadIdx.x == 0 \&\& atomicAdd(\&calls, 1) % 3 == 1) yr[0] = nextafterf(yr[0], 2.f);" &&
	sed -i "s/^__global__ void softmax_rows/__device__ int calls;\n__global__ void softmax_rows/" nondet/softmax/kernel.cu &&
	test_expect_code 1 git autokernel verify nondet/softmax >out &&
	grep "stage 4 (determinism)" out
'

test_expect_success 'a compile error shows nvcc' '
	kernel_dir broken "" "this is not cuda;" &&
	test_expect_code 1 git autokernel verify broken/softmax 2>err &&
	grep "nvcc exited with" err && grep "error" err | grep -v "unable to build"
'

test_done
