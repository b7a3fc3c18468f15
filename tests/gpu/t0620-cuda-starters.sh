#!/bin/sh
# The nine CUDA starters through the whole git path on a CUDA device:
# start (build, five stages at the op's default shapes, benchmark, the
# baseline commit with its trailers and note), then bench in bf16.
. "$(dirname "$0")/../lib.sh"

export AUTOKERNEL_BENCH_MS=${AUTOKERNEL_BENCH_MS:-600}
new_repo repo
cd repo || exit 1

for op in matmul softmax layernorm rmsnorm cross_entropy reduce \
	  rotary_embedding flash_attention fused_mlp; do
	test_expect_success "$op: the CUDA starter passes and is the baseline" "
		git autokernel start $op --backend cuda >../start-$op.out 2>&1 &&
		git log -1 --format=%B autokernel/$op | grep 'Autokernel-Verify: pass 5/5' &&
		git notes --ref=autokernel show autokernel/$op >../note-$op.json &&
		git autokernel bench --dtype bf16 --json >../bench-bf16-$op.json
	"
	git checkout -q main
done

# For the results table: every note and bf16 timing in one file.
if test -n "${AK_RESULTS:-}"; then
	python3 - "$AK_RESULTS" ../note-*.json ../bench-bf16-*.json <<'PY'
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
