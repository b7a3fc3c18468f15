#!/bin/sh
# profile on traces of transformers' own models (LlamaForCausalLM and
# GPT2LMHeadModel, random weights), recorded on an H200 by
# tests/fixtures/record-transformers.py: the profile agrees with the
# profiler's key_averages(), the rows are the ops the model's code writes
# out, with shapes and floors, and the trace without its scopes (what
# record_shapes=True alone gives, and what `profile -- python3 ...`
# records) gives the same table.  Skipped until the fixtures are in the
# tree; once they are, a mapping that disagrees fails.
. "$(dirname "$0")/lib.sh"

fx="$TEST_DIR/fixtures"

json_check () {
	python3 "$fx/json-check.py" "$1"
}

for model in llama gpt2; do
	trace="$fx/hf-$model-trace.json.gz"
	if ! test -f "$trace"; then
		test_skip "transformers' $model" \
			"no hf-$model-trace.json.gz: run tests/fixtures/record-transformers.py on a GPU"
		continue
	fi
	test_expect_success "hf $model: the profile agrees with key_averages()" "
		git autokernel profile --json '$trace' >$model.json &&
		python3 '$fx/check-keyavg.py' $model.json \
			'$fx/hf-$model-trace.keyavg.json' hf-$model
	"
	test_expect_success "hf $model without scopes: the same table (2 points)" "
		python3 '$fx/strip-scopes.py' '$trace' flat-$model.json &&
		git autokernel profile --json flat-$model.json >$model-flat.json &&
		python3 '$fx/compare-profiles.py' $model.json $model-flat.json 2
	"
done

if test -f "$fx/hf-llama-trace.json.gz"; then
	# A compute-bound op's floor is capped at its measured time where
	# the model ran faster than the ceilings (the H200's cuBLAS above
	# the default 700 TFLOPS): its bound is then exactly 1.
	test_expect_success 'hf llama: rotary, RMSNorm, SwiGLU, loss: rows with shapes and floors' '
		json_check llama.json <<-\EOF
		r["not_covered"]["share"] <= 0.10
		all(op(o)["floor_ms"] > 0 and op(o)["bound"] > 1 for o in ("rotary_embedding", "rmsnorm", "cross_entropy"))
		all(op(o)["floor_ms"] > 0 and op(o)["bound"] >= 1 for o in ("fused_mlp", "flash_attention", "matmul"))
		op("rotary_embedding")["shape"] == "8x16x512x128" and op("rotary_embedding")["layout"] == "half"
		op("rotary_embedding")["calls"] == 8 and op("rotary_embedding")["dtype"] == "bf16"
		op("rmsnorm")["shape"] == "4096x2048" and op("rmsnorm")["calls"] == 9
		op("rmsnorm")["dtype"] == "bf16"
		op("fused_mlp")["shape"] == "4096x2048x5504" and op("fused_mlp")["calls"] == 4
		op("cross_entropy")["shape"] == "4096x32000" and op("cross_entropy")["calls"] == 1
		op("cross_entropy")["dtype"] == "bf16"
		op("flash_attention")["shape"] == "8x16x512x128" and op("flash_attention")["calls"] == 4
		op("matmul")["calls"] >= 17
		EOF
	'
fi
if test -f "$fx/hf-gpt2-trace.json.gz"; then
	test_expect_success 'hf gpt2: LayerNorm, eager attention, GELU MLP, loss' '
		json_check gpt2.json <<-\EOF
		"fused_mlp" not in ops and "softmax" not in ops
		op("layernorm")["shape"] == "4096x1024" and op("layernorm")["calls"] == 9
		op("flash_attention")["shape"] == "8x16x512x64" and op("flash_attention")["calls"] == 4
		op("matmul")["calls"] == 17
		op("cross_entropy")["shape"] == "4096x50257" and op("cross_entropy")["dtype"] == "f16"
		EOF
	'
fi

test_done
