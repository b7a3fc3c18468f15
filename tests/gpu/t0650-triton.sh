#!/bin/sh
# The triton backend on a CUDA device with real Triton: the integrity
# checks of the Python runner (guard bands, input checks, poisoned outputs,
# a kernel on a stream of its own, illegal addresses, hangs, launch and
# compile errors, nondeterminism), then the nine Triton starters through
# the whole git path (start, baseline commit, bench in bf16), as
# t0610 and t0620 do for CUDA.  AK_TRITON_STARTERS (all nine) picks the
# starters; the last case runs where softmax is among them.
. "$(dirname "$0")/../lib.sh"

export AUTOKERNEL_BENCH_MS=${AUTOKERNEL_BENCH_MS:-600}
base="$TEST_DIR/kernels/softmax-f32.py"

# kernel_dir NAME HOST_REPLACEMENT DEVICE_REPLACEMENT
kernel_dir () {
	mkdir -p "$1/softmax" &&
	triton_problem softmax | sed -e 's/"f16", "bf16", "f32"/"f32"/' \
		>"$1/softmax/problem.json" &&
	sed -e "s|# HOST_BREAK|$2|" -e "s|# DEVICE_BREAK|$3|" \
		"$base" >"$1/softmax/kernel.py"
}

test_expect_success 'a correct Triton kernel passes all five stages' '
	kernel_dir good "" "" &&
	git autokernel verify good/softmax >out &&
	grep "on triton: NVIDIA" out && grep "pass 5/5" out
'

test_expect_success 'bench times it beside a copy of the same bytes' '
	git autokernel bench --json good/softmax >b.json &&
	python3 -c "import json; b=json.load(open(\"b.json\")); \
		k=b[\"kernels\"][0]; assert k[\"median_us\"] > 0 and \
		b[\"copy\"][\"median_us\"] > 0, b"
'

test_expect_success 'a kernel on a stream of its own is timed and checked' '
	kernel_dir own "side = torch.cuda.Stream(); side.wait_stream(torch.cuda.current_stream())\n    with torch.cuda.stream(side): softmax_rows[(rows,)](x, y, cols, BLOCK=BLOCK)\n    return 0" "" &&
	git autokernel verify own/softmax >out &&
	grep "pass 5/5" out
'

test_expect_success 'a kernel that launches nothing writes nothing' '
	kernel_dir nothing "return 0" "" &&
	test_expect_code 1 git autokernel verify nothing/softmax >out &&
	grep "not written" out
'

test_expect_success 'a write past the output is caught by the guard band' '
	kernel_dir oob "" "tl.store(y_ptr + r * C + C, 1.0, mask=r == tl.num_programs(0) - 1)" &&
	test_expect_code 1 git autokernel verify oob/softmax >out &&
	grep "wrote outside output 0: 1 bytes after the end" out
'

test_expect_success 'a write into the input is caught' '
	kernel_dir scribble "" "tl.store(x_ptr + cols, 0.0, mask=(r == 0) \& (cols == 0))" &&
	test_expect_code 1 git autokernel verify scribble/softmax >out &&
	grep "modified input 0" out
'

test_expect_success 'an illegal address is a verdict, and the next case runs' '
	kernel_dir illegal "" "tl.store(y_ptr + (1 << 42), 1.0, mask=r == 0)" &&
	test_expect_code 1 git autokernel verify illegal/softmax 2>err >out &&
	grep -i "illegal" err out &&
	git autokernel verify good/softmax | grep "pass 5/5"
'

test_expect_success 'an infinite loop is killed at the time limit' '
	kernel_dir hang "" "v = tl.load(x_ptr, volatile=True)\n    while v == v:\n        v = tl.load(x_ptr, volatile=True)" &&
	AUTOKERNEL_TIMEOUT=3 test_expect_code 1 \
		git autokernel verify hang/softmax 2>err &&
	grep "timed out after 6.0 s" err
'

test_expect_success 'a launch error is reported' '
	kernel_dir launch "softmax_rows[(rows, 1 << 17)](x, y, cols, BLOCK=BLOCK)" "" &&
	test_expect_code 1 git autokernel verify launch/softmax 2>err &&
	grep "ak_kernel() raised" err
'

test_expect_success 'a nondeterministic kernel fails stage 4' '
	kernel_dir nondet "softmax_rows[(rows,)](x, y, cols, BLOCK=BLOCK); calls.append(1)\n    if len(calls) % 3 == 1: y.view(-1)[:1].mul_(1 + 1e-6)\n    return 0" "" &&
	echo "calls = []" >>nondet/softmax/kernel.py &&
	test_expect_code 1 git autokernel verify nondet/softmax >out &&
	grep "stage 4 (determinism)" out
'

test_expect_success 'a Python syntax error shows the line' '
	kernel_dir broken "" "this is not (python" &&
	test_expect_code 1 git autokernel verify broken/softmax 2>err &&
	grep "unable to build .softmax/kernel.py." err && grep SyntaxError err
'

test_expect_success 'a Triton compile error is the build verdict' '
	kernel_dir nocompile "" "tl.store(y_ptr + tl.arange(0, 3), 0.0)" &&
	test_expect_code 1 git autokernel verify nocompile/softmax 2>err &&
	grep "unable to build .softmax/kernel.py.: at 4x32 f32: ak_kernel() raised" err
'

new_repo repo
cd repo || exit 1

for op in ${AK_TRITON_STARTERS:-matmul softmax layernorm rmsnorm cross_entropy reduce \
	  rotary_embedding flash_attention fused_mlp}; do
	test_expect_success "$op: the Triton starter passes and is the baseline" "
		{ git autokernel start $op --backend triton >../start-$op.out 2>&1 ||
		  { cat ../start-$op.out; false; }; } &&
		git log -1 --format=%B autokernel/$op | grep 'Autokernel-Verify: pass 5/5' &&
		git notes --ref=autokernel show autokernel/$op >../note-$op.json &&
		git autokernel bench --dtype bf16 --json >../bench-bf16-$op.json
	"
	git checkout -q main
done

case " ${AK_TRITON_STARTERS:-softmax} " in *" softmax "*)
test_expect_success 'an experiment on a Triton starter: a tunable changed' '
	git checkout -q autokernel/softmax &&
	sed -i "s/^BLOCK = 4096 /BLOCK = 2048 /" softmax/kernel.py &&
	git add softmax && { git commit -q -m "2048 a block" >../exp.out 2>&1; true; } &&
	grep -E "verdict: (keep|reject):" ../exp.out
'
esac

# For the results table: every note and bf16 timing in one file.
if test -n "${AK_RESULTS_TRITON:-}"; then
	python3 - "$AK_RESULTS_TRITON" ../note-*.json ../bench-bf16-*.json <<'PY'
import json, sys
out = {}
for f in sys.argv[2:]:
    try:
        out[f.split('/')[-1]] = json.load(open(f))
    except Exception as e:
        out[f.split('/')[-1]] = str(e)
json.dump(out, open(sys.argv[1], 'w'), indent=1)
PY
fi

test_done
