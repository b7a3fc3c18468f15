#!/bin/sh
# bench --torch on a CUDA device: PyTorch's own op (python/torch_ref/)
# beside the CUDA starter of every op, in f16 and bf16 (and softmax in
# f32), each of its timed calls checked by the harness; torch.compile
# timed too where torch 2 and triton are there; then the git path:
# start, bench --torch --record, the report's PyTorch column.
# AK_TORCH_OPS (all) picks the ops of the first cases.
. "$(dirname "$0")/../lib.sh"

need_torch
export AUTOKERNEL_BENCH_MS=${AUTOKERNEL_BENCH_MS:-300}
# the cases below expect torch.compile timed wherever it works
unset AUTOKERNEL_TORCH_COMPILE

# whether torch.compile is timed here (torch 2 with triton)
if "$TORCH_PY" -c "import torch, triton; torch.compile" 2>/dev/null; then
	COMPILE=1
else
	COMPILE=
fi

for op in softmax layernorm rmsnorm cross_entropy reduce matmul \
	  rotary_embedding flash_attention fused_mlp; do
	mkdir -p ops/$op &&
	cuda_problem $op >ops/$op/problem.json &&
	cp "$SRC_DIR/kernels/cuda/$op.cu" ops/$op/kernel.cu
done
mkdir -p ops/half &&
sed -e 's/"seed": 7/"seed": 7, "layout": "half"/' \
	ops/rotary_embedding/problem.json >ops/half/problem.json &&
cp ops/rotary_embedding/kernel.cu ops/half/

# check_fig FILE: PyTorch's figures in bench --json's FILE, and
# torch.compile's where it is timed
check_fig () {
	COMPILE=$COMPILE python3 - "$1" <<-\EOF
	import json, os, sys
	t = json.load(open(sys.argv[1]))["torch"]
	assert "absent" not in t, t
	assert t["eager"]["median_us"] > 0 and t["checked"]["calls"] > 0, t
	if os.environ.get("COMPILE"):
	    assert t["compile"]["median_us"] > 0, t
	EOF
}

for d in ${AK_TORCH_OPS:-softmax layernorm rmsnorm cross_entropy reduce matmul \
	 rotary_embedding half flash_attention fused_mlp}; do
	for dt in f16 bf16; do
		test_expect_success "$d $dt: PyTorch beside the starter, every call checked" "
			git autokernel bench --torch --json --dtype $dt ops/$d \
				>$d-$dt.json 2>$d-$dt.err &&
			! grep 'no PyTorch figure' $d-$dt.err &&
			check_fig $d-$dt.json ||
			{ cat $d-$dt.err; false; }
		"
	done
done

test_expect_success 'softmax f32: PyTorch beside the starter' '
	git autokernel bench --torch --json --dtype f32 ops/softmax \
		>softmax-f32.json && check_fig softmax-f32.json
'

test_expect_success 'start, bench --torch --record, the report has the column' '
	new_repo repo && cd repo &&
	git autokernel start softmax --backend cuda >../start.out 2>&1 &&
	git autokernel bench --torch --record >../bench.out 2>../bench.err &&
	grep "^beside PyTorch .* on NVIDIA" ../bench.out &&
	grep "^  PyTorch " ../bench.out &&
	grep "bench: recorded PyTorch.s figures" ../bench.err &&
	git autokernel report >../report.md &&
	grep "| PyTorch (us) | vs PyTorch |" ../report.md &&
	if test -n "$COMPILE"; then
		grep "^  PyTorch compile " ../bench.out &&
		grep "torch.compile (us)" ../report.md
	fi
'

test_done
