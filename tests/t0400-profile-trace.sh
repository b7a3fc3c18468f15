#!/bin/sh
# profile TRACE: a PyTorch profiler trace ranked by op, with shares, calls,
# typical shapes, floors and Amdahl bounds; plain and gzipped; --json.
. "$(dirname "$0")/lib.sh"

fx="$TEST_DIR/fixtures"

# json_check FILE <EXPRS: each line a Python expression on FILE's JSON
json_check () {
	python3 "$TEST_DIR/fixtures/json-check.py" "$1"
}

test_expect_success 'the synthetic trace ranks the ops by GPU time' '
	git autokernel profile "$fx/synthetic-trace.json" >out &&
	sed -n "/^op /,/^\$/p" out | awk "NR > 1 && NF { print \$1 }" >order &&
	printf "%s\n" fused_mlp matmul flash_attention rmsnorm cross_entropy \
		rotary_embedding softmax layernorm reduce not >expect &&
	diff -u expect order
'

test_expect_success 'the table shows shares, calls and typical shapes' '
	grep "1.000 ms of GPU kernel time in 36 kernels on NVIDIA H200" out &&
	grep -E "^fused_mlp +34.0% +0.340 +1  256x512x1376 f16 " out &&
	grep -E "^matmul +20.0% +0.200 +5  256x512x512 f16 " out &&
	grep -E "^flash_attention +15.0% .* 2x8x128x64 f16 " out &&
	grep -E "^rmsnorm +10.0% +0.100 +2  256x512 f16 " out &&
	grep -E "^not covered +4.0% +0.040 +3  aten::add 2.0%, aten::copy_ 2.0%" out &&
	grep "default H200 figures: copy 3000 GB/s" out &&
	grep "Copies and fills (0.050 ms)" out
'

test_expect_success '--json gives the same numbers' '
	git autokernel profile --json "$fx/synthetic-trace.json" >out.json &&
	json_check out.json <<-\EOF
	r["source"] == "trace" and r["kernels"] == 36
	near(r["total_ms"], 1.0) and near(r["memcpy_ms"], 0.05)
	list(ops)[:3] == ["fused_mlp", "matmul", "flash_attention"]
	near(op("fused_mlp")["share"], 0.34)
	near(op("rotary_embedding")["share"], 0.04)
	near(op("layernorm")["share"], 0.024)
	near(op("reduce")["share"], 0.016)
	near(r["not_covered"]["share"], 0.04)
	near(sum(o["share"] for o in ops.values()) + r["not_covered"]["share"], 1)
	op("cross_entropy")["shape"] == "256x32000"
	op("cross_entropy")["calls"] == 1
	op("rotary_embedding")["shape"] == "2x8x128x64"
	op("softmax")["shape"] == "256x32000"
	op("layernorm")["shape"] == "256x512"
	op("matmul")["dtype"] == "f16" and len(op("matmul")["shapes"]) == 2
	r["ceilings"]["source"] == "default H200"
	all(0 < o["floor_ms"] <= o["time_ms"] for o in ops.values())
	all(1 < o["bound"] <= o["limit"] for o in ops.values())
	near(op("fused_mlp")["limit"], 1 / 0.66, 1e-4)
	EOF
'

test_expect_success 'the Amdahl bound follows from the floor' '
	json_check out.json <<-\EOF
	all(near(o["bound"], r["total_ms"] / (r["total_ms"] - o["time_ms"] + o["floor_ms"]), 1e-4) for o in ops.values())
	EOF
'

test_expect_success 'a gzipped trace reads the same as the plain one' '
	gzip -c "$fx/synthetic-trace.json" >trace.json.gz &&
	git autokernel profile --json trace.json.gz >gz.json &&
	sed -e "/\"trace\":/d" out.json >a &&
	sed -e "/\"trace\":/d" gz.json >b &&
	diff -u a b
'

test_expect_success 'what no op may claim stays not covered' '
	git autokernel profile --json "$fx/synthetic-misc.json" >misc.json &&
	json_check misc.json <<-\EOF
	sorted(ops) == ["matmul", "reduce", "rmsnorm"]
	near(op("matmul")["share"], 0.6) and op("matmul")["calls"] == 4
	op("matmul")["shape"] == "1024x3072x768"
	near(op("rmsnorm")["share"], 0.1) and op("rmsnorm")["calls"] == 1
	op("rmsnorm")["shape"] == "1024x768" and op("rmsnorm")["dtype"] == "f16"
	near(op("reduce")["share"], 0.1) and op("reduce")["shape"] == "64x4096"
	near(r["not_covered"]["share"], 0.2)
	{t["name"] for t in r["not_covered"]["top"]} == {"aten::native_layer_norm_backward", "aten::mul", "aten::tanh", "aten::add"}
	EOF
'

test_expect_success 'ops written out are recognized from the sequence of ops' '
	git autokernel profile --json "$fx/synthetic-patterns.json" >pat.json &&
	json_check pat.json <<-\EOF
	near(r["total_ms"], 1.0)
	list(ops) == ["fused_mlp", "matmul", "rotary_embedding", "flash_attention", "cross_entropy", "rmsnorm", "softmax"]
	near(op("fused_mlp")["share"], 0.46) and op("fused_mlp")["calls"] == 2
	op("fused_mlp")["shape"] == "4096x2048x5504" and op("fused_mlp")["dtype"] == "bf16"
	[s["shape"] for s in op("fused_mlp")["shapes"]] == ["4096x2048x5504", "1024x1024x2816"]
	near(op("matmul")["share"], 0.13) and op("matmul")["calls"] == 5
	near(op("rotary_embedding")["share"], 0.115) and op("rotary_embedding")["calls"] == 4
	op("rotary_embedding")["shape"] == "8x16x512x128" and op("rotary_embedding")["layout"] == "half"
	[(s["shape"], s["dtype"], s["layout"], s["calls"]) for s in op("rotary_embedding")["shapes"]] == [("8x16x512x128", "bf16", "half", 2), ("2x8x128x64", "f16", "interleaved", 2)]
	near(op("flash_attention")["share"], 0.1) and op("flash_attention")["calls"] == 1
	op("flash_attention")["shape"] == "8x16x512x64"
	near(op("cross_entropy")["share"], 0.07) and op("cross_entropy")["calls"] == 1
	op("cross_entropy")["shape"] == "4096x32000" and op("cross_entropy")["dtype"] == "bf16"
	near(op("rmsnorm")["share"], 0.06) and op("rmsnorm")["calls"] == 1
	op("rmsnorm")["shape"] == "4096x2048" and op("rmsnorm")["dtype"] == "bf16"
	near(op("softmax")["share"], 0.01) and op("softmax")["shape"] == "65536x512"
	near(r["not_covered"]["share"], 0.055)
	[(t["name"], round(t["share"], 3)) for t in r["not_covered"]["top"]] == [("gelu (tanh, written out)", 0.02), ("aten::add", 0.015), ("aten::mul", 0.01), ("aten::neg", 0.005), ("aten::silu", 0.005)]
	EOF
'

test_expect_success 'the table says which rotary layout the model uses' '
	git autokernel profile "$fx/synthetic-patterns.json" >pat.out &&
	grep "^rotary_embedding: the half-split layout, x\[i\] with x\[i+D/2\]" pat.out &&
	grep "starts it with --layout half" pat.out
'

test_expect_success 'measured ceilings of the device give the floors' '
	new_repo repo &&
	mkdir -p repo/.git/autokernel &&
	cat >repo/.git/autokernel/device-cuda-nvidia-h200.json <<-\EOF &&
	{"copy_gbps": 1500, "matrix_tflops": {"f16": 350, "bf16": 350, "f32": 30}}
	EOF
	(cd repo && git autokernel profile "$fx/synthetic-trace.json") >out &&
	grep "measured on the device" out &&
	(cd repo && git autokernel profile --json "$fx/synthetic-trace.json") \
		>measured.json &&
	json_check measured.json <<-\EOF
	r["ceilings"]["source"] == "measured"
	all(near(o["floor_ms"], 2 * p["floor_ms"], 1e-3) for o, p in zip(r["ops"], json.load(open("out.json"))["ops"]))
	EOF
'

test_expect_success '--backend picks whose ceilings are read' '
	(cd repo && git autokernel profile --json --backend hip \
		"$fx/synthetic-trace.json") >hip.json &&
	json_check hip.json <<-\EOF
	r["ceilings"]["source"] == "default H200"
	EOF
'

# The fixtures made by make-traces.py on a GPU, when they are present:
# the profile must agree with the profiler's own sums, and see the models.
for model in llama gpt2; do
	if ! test -f "$fx/$model-trace.json.gz"; then
		test_skip "$model trace agrees with key_averages()" \
			"no $model-trace.json.gz: run tests/fixtures/make-traces.py on a GPU"
		continue
	fi
	test_expect_success "$model trace agrees with key_averages()" '
		git autokernel profile --json "$fx/$model-trace.json.gz" >$model.json &&
		python3 "$fx/check-keyavg.py" $model.json \
			"$fx/$model-trace.keyavg.json" $model
	'
done

if test -f "$fx/llama-trace.json.gz"; then
	test_expect_success 'the llama trace: its layers, op by op' '
		json_check llama.json <<-\EOF
		r["device"] == "NVIDIA H200"
		op("rmsnorm")["calls"] == 5 and op("rmsnorm")["shape"] == "1024x1024"
		op("rotary_embedding")["calls"] == 4
		op("rotary_embedding")["shape"] == "2x16x512x64"
		op("rotary_embedding")["layout"] == "half"
		op("fused_mlp")["calls"] == 2
		op("fused_mlp")["shape"] == "1024x1024x2816"
		op("fused_mlp")["dtype"] == "f16"
		op("flash_attention")["calls"] == 2
		op("flash_attention")["shape"] == "2x16x512x64"
		op("cross_entropy")["shape"] == "1024x32000"
		op("cross_entropy")["dtype"] == "f16"
		op("matmul")["calls"] == 9
		"reduce" not in ops
		r["not_covered"]["share"] < 0.02
		{t["name"] for t in r["not_covered"]["top"]} == {"aten::add", "aten::gather"}
		EOF
	'

	test_expect_success 'the llama trace without its scopes: the same table' '
		python3 "$fx/strip-scopes.py" "$fx/llama-trace.json.gz" flat.json &&
		! grep python_function flat.json &&
		git autokernel profile --json flat.json >llama-flat.json &&
		python3 "$fx/compare-profiles.py" llama.json llama-flat.json 0.1
	'
fi
if test -f "$fx/gpt2-trace.json.gz"; then
	test_expect_success 'the gpt2 trace: its layers, op by op' '
		json_check gpt2.json <<-\EOF
		op("layernorm")["calls"] == 5 and op("layernorm")["shape"] == "1024x768"
		op("flash_attention")["calls"] == 2
		op("flash_attention")["shape"] == "2x12x512x64"
		op("matmul")["calls"] == 9
		op("matmul")["shape"] == "1024x50257x768"
		op("cross_entropy")["dtype"] == "f16"
		sorted(ops) == ["cross_entropy", "flash_attention", "layernorm", "matmul"]
		r["not_covered"]["share"] < 0.03
		EOF
	'
fi

test_done
