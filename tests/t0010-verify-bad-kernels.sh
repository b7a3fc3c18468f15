#!/bin/sh
# verify turns every way a kernel can be wrong into a verdict with exit 1,
# naming the stage and what failed; the tool itself never crashes or hangs.
. "$(dirname "$0")/lib.sh"

base="$TEST_DIR/kernels/softmax-f32.c"

# kernel_dir NAME REPLACEMENT: softmax/ with the /* BREAK */ line replaced
kernel_dir () {
	mkdir -p "$1/softmax" &&
	small_problem softmax | sed -e 's/"f16", "bf16", "f32"/"f32"/' \
		>"$1/softmax/problem.json" &&
	sed -e "s|/\* BREAK \*/|$2|" "$base" >"$1/softmax/kernel.c"
}

test_expect_success 'a correct kernel passes all five stages' '
	kernel_dir good "" &&
	git autokernel verify good/softmax >out &&
	grep "pass 5/5" out
'

test_expect_success 'verify --json reports every stage' '
	git autokernel verify --json good/softmax >out.json &&
	python3 -c "import json,sys; r=json.load(open(\"out.json\")); \
		assert r[\"pass\"] and len(r[\"stages\"]) == 5"
'

test_expect_success 'a kernel that does not compile shows the compiler' '
	kernel_dir broken "this is not C;" &&
	test_expect_code 1 git autokernel verify broken/softmax 2>err &&
	grep "unable to build .softmax/kernel.c." err &&
	grep "error:" err | grep -v "unable to build"
'

test_expect_success 'a kernel that writes nothing' '
	kernel_dir nothing "" &&
	sed -i -e "s/s += yr\[c\] = expf/s += expf/" -e "s|yr\[c\] /= s;|;|" \
		nothing/softmax/kernel.c &&
	test_expect_code 1 git autokernel verify nothing/softmax >out &&
	grep "stage 1 (smoke)" out && grep "not written" out
'

test_expect_success 'a kernel that writes a constant' '
	kernel_dir const "for (int64_t i = 0; i < rows * cols; i++) y[i] = 0.25f;" &&
	test_expect_code 1 git autokernel verify const/softmax >out &&
	grep "FAIL" out && grep -E "every output is 0.25|expected" out
'

test_expect_success 'a kernel that writes zeros' '
	kernel_dir zeros "for (int64_t i = 0; i < rows * cols; i++) y[i] = 0;" &&
	test_expect_code 1 git autokernel verify zeros/softmax >out &&
	grep "stage 1 (smoke)" out
'

test_expect_success 'a kernel that writes past its output' '
	kernel_dir oob "y[rows * cols] = 1;" &&
	test_expect_code 1 git autokernel verify oob/softmax >out &&
	grep "wrote outside output 0: 1 bytes after the end" out
'

test_expect_success 'a kernel that writes before its output' '
	kernel_dir before "y[-1] = 1;" &&
	test_expect_code 1 git autokernel verify before/softmax >out &&
	grep "before the start" out
'

test_expect_success 'a kernel that scribbles on its input' '
	kernel_dir scribble "((float *)x)[3] = 0;" &&
	test_expect_code 1 git autokernel verify scribble/softmax >out &&
	grep "modified input 0 at element 3" out
'

test_expect_success 'a kernel that returns NaN' '
	kernel_dir nan "y[rows * cols / 2] = NAN;" &&
	test_expect_code 1 git autokernel verify nan/softmax >out &&
	grep "nan" out
'

test_expect_success 'a kernel that is wrong in the last digits' '
	kernel_dir wrong "y[0] *= 1.01f;" &&
	test_expect_code 1 git autokernel verify wrong/softmax >out &&
	grep "out\[0,0\]\|y\[0,0\]" out && grep "expected" out
'

test_expect_success 'a kernel that hangs is stopped at autokernel.timeout' '
	kernel_dir hang "for (volatile int i = 1; i; ) ;" &&
	AUTOKERNEL_TIMEOUT=1 test_expect_code 1 \
		git autokernel verify hang/softmax >out &&
	grep "timed out after 1.0 s" out
'

test_expect_success 'a kernel that crashes' '
	kernel_dir crash "*(volatile int *)8 = 1;" &&
	test_expect_code 1 git autokernel verify crash/softmax >out &&
	grep "runner crashed" out &&
	# a sanitizer build of the runner reports the SEGV itself
	grep -E "killed by signal 11|SEGV" out
'

test_expect_success 'a kernel that aborts' '
	kernel_dir abort "abort();" &&
	sed -i "1i #include <stdlib.h>" abort/softmax/kernel.c &&
	test_expect_code 1 git autokernel verify abort/softmax >out &&
	grep "signal 6" out
'

test_expect_success 'a kernel that is not deterministic' '
	kernel_dir nondet "static int calls; if (calls++ % 2 == 1) y[5] = nextafterf(y[5], 1);" &&
	test_expect_code 1 git autokernel verify nondet/softmax >out &&
	grep "stage 4 (determinism)" out && grep "run 2 differs from run 1" out
'

# an online max and sum that starts on -inf takes exp(-inf - -inf): NaN
test_expect_success 'a kernel that loses rows masked with -inf' '
	kernel_dir masked "for (int64_t r = 0; r < rows; r++) if (isinf(x[r * cols])) y[r * cols] = NAN;" &&
	test_expect_code 1 git autokernel verify masked/softmax >out &&
	grep "stage 3 (stability)" out && grep "masked" out
'

test_expect_success 'a kernel that returns an error code' '
	kernel_dir rc "return 7;" &&
	test_expect_code 1 git autokernel verify rc/softmax >out &&
	grep "ak_kernel() returned 7" out
'

test_expect_success 'a kernel without ak_kernel()' '
	kernel_dir noentry "" &&
	sed -i "s/^int ak_kernel(/int not_the_kernel(/" noentry/softmax/kernel.c &&
	test_expect_code 1 git autokernel verify noentry/softmax 2>err &&
	grep "does not define ak_kernel" err
'

test_expect_success 'an edge-case bug is caught in stage 5' '
	kernel_dir edge "if (cols % 2) y[0] = 0.5f;" &&
	test_expect_code 1 git autokernel verify edge/softmax >out &&
	grep "stage 5 (edge cases)" out
'

test_expect_success 'a missing problem.json' '
	mkdir -p missing/softmax &&
	cp "$base" missing/softmax/kernel.c &&
	test_expect_code 2 git autokernel verify missing/softmax 2>err &&
	grep "not a kernel directory" err
'

test_expect_success 'a malformed problem.json' '
	kernel_dir malformed "" &&
	echo "{ \"op\": \"softmax\", " >malformed/softmax/problem.json &&
	test_expect_code 1 git autokernel verify malformed/softmax 2>err &&
	grep "malformed JSON" err
'

test_expect_success 'an unknown op' '
	kernel_dir unknown "" &&
	sed -i "s/\"op\": \"softmax\"/\"op\": \"softmaxx\"/" \
		unknown/softmax/problem.json &&
	test_expect_code 1 git autokernel verify unknown/softmax 2>err &&
	grep "unknown op .softmaxx." err
'

test_expect_success 'a bad shape in problem.json' '
	kernel_dir badshape "" &&
	sed -i "s/\"16x256\"/\"16x\"/" badshape/softmax/problem.json &&
	test_expect_code 1 git autokernel verify badshape/softmax 2>err &&
	grep "16x" err
'

test_done
