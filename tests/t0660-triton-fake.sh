#!/bin/sh
# The triton backend where there is no GPU and no Triton, on the Python
# runner's fake device (CPU torch): its protocol and checks request by
# request (triton-proto.py, as the parent speaks it), the CUDA timer on a
# simulated GPU (triton-timer.py), then through the tool: the build's
# syntax check, the warm-up that is Triton's compile, every verdict of
# the stages, a hang and a crash; the starters' syntax.
. "$(dirname "$0")/lib.sh"

need_torch
export AUTOKERNEL_TRITON_DEVICE=fake

# kernel_dir NAME REPLACEMENT: softmax/ with the BREAK line replaced
kernel_dir () {
	mkdir -p "$1/softmax" &&
	triton_problem softmax >"$1/softmax/problem.json" &&
	sed -e "s|# BREAK|$2|" "$TEST_DIR/kernels/softmax-torch.py" \
		>"$1/softmax/kernel.py"
}

test_expect_success 'the runner, request by request, and kernels that cheat' '
	"$TORCH_PY" "$TEST_DIR/triton-proto.py" \
		"$SRC_DIR/python/ak_runner_triton.py" >proto.out 2>&1 ||
	{ grep -A3 "^not ok" proto.out; false; }
'

test_expect_success 'the CUDA timer on a simulated GPU: no host wait is timed' '
	"$TORCH_PY" "$TEST_DIR/triton-timer.py" \
		"$SRC_DIR/python/ak_triton_device.py" >timer.out 2>&1 ||
	{ cat timer.out; false; }
'

test_expect_success 'a correct kernel passes all five stages' '
	kernel_dir good "" &&
	git autokernel verify good/softmax >out &&
	grep "on triton: fake device" out && grep "pass 5/5" out
'

# The impossible-time check holds each shape to its own bytes: a small
# shape of a workload whose bench shape is large is no cheat.
test_expect_success 'a small shape after a large one is not called impossible' '
	kernel_dir wl "" &&
	"$TORCH_PY" -c "import json, sys; p = json.load(open(sys.argv[1])); \
		p[\"dtypes\"] = [\"f32\"]; p[\"bench_shape\"] = \"1024x2048\"; \
		p[\"workload\"] = [{\"shape\": \"1024x2048\", \"weight\": 0.5}, \
			{\"shape\": \"1x64\", \"weight\": 0.5}]; \
		json.dump(p, open(sys.argv[1], \"w\"))" wl/softmax/problem.json &&
	AUTOKERNEL_BENCH_MS=200 git autokernel bench wl/softmax >out 2>err ||
	{ cat out err; false; } &&
	grep "^1x64 f32" out && ! grep impossible err
'

# Python launches between the timing events: the parent's checking
# threads must not run beside a timed call.
test_expect_success 'the parent checks each call before the next is timed' '
	AUTOKERNEL_TRACE="$TRASH/trace" AUTOKERNEL_BENCH_MS=50 \
		git autokernel bench good/softmax >out 2>err ||
	{ cat out err; false; } &&
	grep "bench: lockstep: each call checked before the next" trace
'

# The kernel runs in the runner's process: replacing the timer is a
# verdict, whether at import or in a call.
test_expect_success 'a kernel that replaces the timer is caught in its call' '
	kernel_dir clock "import ak_triton_device as d; d.FakeDevice.timer_stop = lambda self: 1.0" &&
	test_expect_code 1 git autokernel verify clock/softmax >out 2>err &&
	grep "the kernel replaced the runner.s ak_triton_device.FakeDevice.timer_stop: its times cannot be trusted" out err
'

test_expect_success 'or its code, keeping the function' '
	kernel_dir code "import ak_triton_device as d; d.FakeDevice.timer_stop.__code__ = (lambda self: 1.0).__code__" &&
	test_expect_code 1 git autokernel verify code/softmax >out 2>err &&
	grep "the kernel replaced the runner.s ak_triton_device.FakeDevice.timer_stop.__code__" out err
'

test_expect_success 'or the device module.s clock' '
	kernel_dir clockmod "import ak_triton_device as d, types; d.time = types.SimpleNamespace(perf_counter=lambda: 0.0)" &&
	test_expect_code 1 git autokernel verify clockmod/softmax >out 2>err &&
	grep "the kernel replaced the runner.s ak_triton_device.time" out err
'

test_expect_success 'and at import' '
	kernel_dir escape "" &&
	echo "import ak_triton_device; ak_triton_device.ESCAPE_US = 1e9" \
		>>escape/softmax/kernel.py &&
	test_expect_code 1 git autokernel verify escape/softmax >out 2>err &&
	grep "loading the kernel replaced the runner.s ak_triton_device.ESCAPE_US" out err
'

test_expect_success 'the build is cached by content' '
	git autokernel verify --build-only good/softmax >out &&
	grep "built softmax/kernel.py .* (cached)" out
'

test_expect_success 'a syntax error is the build verdict, with the line' '
	kernel_dir syntax "return (" &&
	test_expect_code 1 git autokernel verify syntax/softmax 2>err &&
	grep "unable to build .softmax/kernel.py.: .* exited with 1" err &&
	grep "File \"softmax/kernel.py\", line 10" err && grep SyntaxError err
'

test_expect_success 'an exception at import is a verdict' '
	kernel_dir import "" &&
	echo "raise ImportError(\"no module named triton\")" \
		>>import/softmax/kernel.py &&
	test_expect_code 1 git autokernel verify import/softmax 2>err &&
	grep "unable to load .softmax/kernel.py.: cannot load the kernel: ImportError: no module named triton (kernel line 11)" err
'

test_expect_success 'an exception at one shape fails the warm-up, the build' '
	kernel_dir raise "if x.shape[0] == 7: raise ValueError(\"seven\")" &&
	test_expect_code 1 git autokernel verify raise/softmax 2>err &&
	grep "unable to build .softmax/kernel.py.: at 7x1000 f16: ak_kernel() raised ValueError: seven (kernel line 10)" err
'

test_expect_success 'a kernel that writes nothing' '
	kernel_dir nothing "" &&
	sed -i "s/^    y.copy_/    0 and y.copy_/" nothing/softmax/kernel.py &&
	test_expect_code 1 git autokernel verify nothing/softmax >out &&
	grep "stage 1 (smoke)" out && grep "not written" out
'

test_expect_success 'a kernel that writes past its output' '
	kernel_dir oob "y.view(-1).as_strided((y.numel() + 1,), (1,))[-1] = 1" &&
	test_expect_code 1 git autokernel verify oob/softmax >out &&
	grep "wrote outside output 0: 1 bytes after the end" out
'

test_expect_success 'a kernel that scribbles on its input' '
	kernel_dir scribble "x.view(-1)[3:4] = 0" &&
	test_expect_code 1 git autokernel verify scribble/softmax >out &&
	grep "modified input 0 at element 3" out
'

test_expect_success 'a kernel that cannot run the case says so' '
	kernel_dir rc "return 2" &&
	test_expect_code 1 git autokernel verify rc/softmax >out &&
	grep "ak_kernel() returned 2" out
'

test_expect_success 'a hang is killed at the time limit' '
	kernel_dir hang "import time; time.sleep(300)" &&
	AUTOKERNEL_TIMEOUT=2 test_expect_code 1 \
		git autokernel verify hang/softmax 2>err &&
	grep "timed out after 4.0 s" err
'

test_expect_success 'a kernel that ends the process is a verdict' '
	kernel_dir exits "import os; os._exit(7)" &&
	test_expect_code 1 git autokernel verify exits/softmax 2>err &&
	grep "the triton runner crashed: it exited with 7" err
'

test_expect_success 'every Triton starter, and every naive one, builds' '
	for f in "$SRC_DIR"/kernels/triton/*.py "$SRC_DIR"/kernels/triton/naive/*.py; do
		op=$(basename "$f" .py) &&
		rm -rf s/$op && mkdir -p s/$op &&
		git autokernel ops $op --problem |
			sed -e "s/\"backend\": \"host\"/\"backend\": \"triton\"/" \
			    -e "s/\"kernel.c\"/\"kernel.py\"/" >s/$op/problem.json &&
		cp "$f" s/$op/kernel.py &&
		git autokernel verify --build-only s/$op >>built || return 1
	done &&
	test $(grep -c "^built" built) = 18
'

if test -r /proc/driver/nvidia/version || test -e /dev/kfd; then
	test_skip "init picks triton where it is the only GPU backend" \
		"a CUDA or HIP device is here"
else
	test_expect_success 'init picks triton where it is the only GPU backend' '
		new_repo initrepo && (cd initrepo && git autokernel init >../out) &&
		grep "^triton: fake device (CPU): copy" out
	'
fi

# The benchmark's fresh-data protocol (doc/runner-protocol.md) is spoken
# by the parent from include/ak-wire.h on.
if test -f "$SRC_DIR/include/ak-wire.h"; then
	test_expect_success 'start on triton: the baseline commit' '
		triton_problem softmax >small.json &&
		sed -e "s|# BREAK||" "$TEST_DIR/kernels/softmax-torch.py" >kernel.py &&
		new_repo repo && cd repo &&
		git autokernel start softmax --backend triton --from ../kernel.py \
			--problem ../small.json &&
		git log -1 --format=%B | grep "Autokernel-Backend: triton" &&
		git log -1 --format=%B | grep "Autokernel-Verify: pass 5/5"
	'
else
	test_skip "start on triton: the baseline commit" \
		"the parent speaks the fresh-data benchmark after include/ak-wire.h"
fi

test_done
