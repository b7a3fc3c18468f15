#!/bin/sh
# profile on a GPU: a CUDA program run under the CUPTI injection library,
# and with PyTorch a small model both ways: under the library, and from the
# torch.profiler traces of make-traces.py checked against key_averages().
. "$(dirname "$0")/../lib.sh"

fx="$TEST_DIR/fixtures"
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}

if ! test -f "$AK_LIBEXEC/libak-cupti.so"; then
	test_skip 'profile -- CMD on a GPU' "no $AK_LIBEXEC/libak-cupti.so (CUPTI)"
	test_done
fi

# json_check FILE <EXPRS: each line a Python expression on FILE's JSON
json_check () {
	python3 "$fx/json-check.py" "$1"
}

test_setup 'build the CUDA program' '
	"$NVCC" -O2 -o cuda-prog "$fx/cuda-prog.cu"
'

test_expect_success 'a CUDA program: gemm, then softmax, then the rest' '
	git autokernel profile -- ./cuda-prog >out &&
	grep "^done" out &&
	sed -n "/^op /,/^\$/p" out | awk "NR > 1 && NF { print \$1 }" >order &&
	printf "%s\n" matmul softmax not >expect &&
	diff -u expect order &&
	grep -E "^not covered .*add_vectors" out
'

test_expect_success 'every kernel is recorded, with the device' '
	git autokernel profile --json -- ./cuda-prog >prog.json &&
	json_check prog.json <<-\EOF
	r["kernels"] == 25 and r["total_ms"] > 0
	op("matmul")["calls"] == 5 and op("softmax")["calls"] == 10
	r["not_covered"]["kernels"] == 10
	(r["device"] or "").startswith("NVIDIA")
	EOF
'

test_expect_success 'a program that fails after its kernels' '
	test_expect_code 1 git autokernel profile -- ./cuda-prog fail 2>err &&
	grep "cuda-prog. exited with 3" err
'

test_expect_success 'a program with no CUDA work' '
	test_expect_code 1 git autokernel profile -- ./cuda-prog none 2>err &&
	grep "no GPU kernels recorded" err
'

if ! python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null
then
	test_skip 'a PyTorch program' 'no torch with CUDA'
	test_skip 'make-traces.py traces agree with key_averages()' 'no torch'
	test_done
fi

test_expect_success 'a PyTorch program under the injection library' '
	cat >model.py <<-\EOF &&
	import torch
	x = torch.randn(2048, 2048, device="cuda", dtype=torch.float16)
	for _ in range(5):
	    y = torch.softmax(x @ x, dim=-1)
	torch.cuda.synchronize()
	EOF
	git autokernel profile --json -- python3 model.py >torch.json &&
	json_check torch.json <<-\EOF
	sorted(list(ops)[:2]) == ["matmul", "softmax"]
	op("matmul")["calls"] >= 5 and op("softmax")["calls"] == 5
	EOF
'

test_expect_success 'make-traces.py traces agree with key_averages()' '
	python3 "$fx/make-traces.py" --out traces --layers 1 --seq 256 &&
	for m in llama gpt2
	do
		git autokernel profile --json traces/$m-trace.json.gz >$m.json &&
		python3 "$fx/check-keyavg.py" $m.json traces/$m-trace.keyavg.json $m ||
		exit 1
	done
'

test_done
