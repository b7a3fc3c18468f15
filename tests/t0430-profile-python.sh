#!/bin/sh
# profile -- python3 ...: the start-up module (python/ak_profile/
# sitecustomize.py) runs the program under torch.profiler with shapes once
# it imports torch, and hands CUPTI over from the injection library.  Here
# on the CPU: what the module does; t0420 tests how the tool reads its
# traces, tests/gpu/t0400-profile-gpu.sh the whole path on a GPU.
. "$(dirname "$0")/lib.sh"

need_torch
site="$SRC_DIR/python/ak_profile"

test_setup 'programs with and without torch' '
	cat >with.py <<-\EOF &&
	import os
	print("before", os.environ.get("CUDA_INJECTION64_PATH"))
	import torch
	print("after", os.environ.get("CUDA_INJECTION64_PATH"))
	x = torch.randn(64, 32)
	print("sum", round(float(torch.softmax(x @ x.t(), -1).sum())))
	EOF
	cat >without.py <<-\EOF &&
	import os, json
	print("after", os.environ.get("CUDA_INJECTION64_PATH"))
	EOF
	mkdir -p traces
'

test_expect_success 'a program that imports torch runs under torch.profiler' '
	PYTHONPATH="$site" AK_PROFILE_TRACE_DIR="$TRASH/traces" \
		CUDA_INJECTION64_PATH=/stand/in.so "$TORCH_PY" with.py >out &&
	grep "^before /stand/in.so" out &&
	grep "^after None" out &&
	grep "^sum 64" out &&
	ls traces/trace-*.json >list &&
	test "$(wc -l <list)" = 1 &&
	python3 -c "import json, sys; t = json.load(open(sys.argv[1])); \
		ev = t[\"traceEvents\"] if isinstance(t, dict) else t; \
		assert any(e.get(\"name\") == \"aten::mm\" for e in ev)" \
		$(cat list)
'

test_expect_success 'a program without torch keeps the injection library' '
	rm -f traces/* &&
	PYTHONPATH="$site" AK_PROFILE_TRACE_DIR="$TRASH/traces" \
		CUDA_INJECTION64_PATH=/stand/in.so "$TORCH_PY" without.py >out &&
	grep "^after /stand/in.so" out &&
	! ls traces/trace-* 2>/dev/null
'

test_expect_success 'without AK_PROFILE_TRACE_DIR the module does nothing' '
	PYTHONPATH="$site" CUDA_INJECTION64_PATH=/stand/in.so \
		"$TORCH_PY" with.py >out &&
	grep "^after /stand/in.so" out &&
	! ls traces/trace-* 2>/dev/null
'

test_expect_success 'a sitecustomize of the user still runs' '
	mkdir -p mine &&
	echo "print(\"mine ran\")" >mine/sitecustomize.py &&
	PYTHONPATH="$site:$TRASH/mine" AK_PROFILE_TRACE_DIR="$TRASH/traces" \
		"$TORCH_PY" with.py >out &&
	test "$(grep -c "^mine ran" out)" = 1 &&
	grep "^sum 64" out
'

test_expect_success 'through the tool: the module is in, no kernels on a CPU' '
	mkdir -p libexec && : >libexec/libak-cupti.so &&
	AUTOKERNEL_LIBEXEC=$TRASH/libexec test_expect_code 1 \
		git autokernel profile -- "$TORCH_PY" with.py >out 2>err &&
	grep "^before $TRASH/libexec/libak-cupti.so" out &&
	grep "^after None" out &&
	grep "no GPU kernels recorded" err
'

test_done
