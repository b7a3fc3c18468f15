#!/bin/sh
# bench --torch: PyTorch's own op (python/torch_ref/) timed at each shape
# in the same run as the kernel, by a runner of its own under the
# harness's rules (on the host backend: the Python runner's fake device,
# CPU torch); --json and --record carry the figures, report shows them;
# every reference passes the harness's checks, and the op() its
# torch.compile twin compiles agrees with it; a wrong one is caught; no
# torch means no column, said once.
. "$(dirname "$0")/lib.sh"

need_torch
export AUTOKERNEL_BENCH_MS=60

# f32: the dtype CPU torch has every op in
small_problem softmax | sed -e 's/"f16", "bf16", "f32"/"f32"/' >small.json

# torch_rows FILE: the PyTorch rows of bench's output, their medians (us)
torch_rows () {
	sed -n 's/^  PyTorch  *\([0-9.]*\) us .*/\1/p' "$1"
}

test_setup 'a softmax branch with a two-shape workload' '
	new_repo repo && cd repo &&
	git autokernel start softmax --backend host --problem ../small.json \
		--shape 64x4096:0.9 --shape 16x256:0.1 >../start.out 2>&1 &&
	cd ..
'

test_expect_success 'bench --torch: a PyTorch row, timed, at each workload shape' '
	(cd repo && git autokernel bench --torch >../out 2>../err) &&
	grep "^beside PyTorch " out &&
	grep "^64x4096 f32" out && grep "^16x256 f32" out &&
	grep "vs PyTorch" out &&
	torch_rows out >us && test $(wc -l <us) = 2 &&
	awk "\$1 <= 0 { exit 1 }" us &&
	grep "^weighted total: .*; PyTorch [0-9.]* us ([0-9.]*x)" out &&
	grep "^  copy (same bytes)" out
'

test_expect_success 'torch.compile is not timed on the fake device, said once' '
	test $(grep -c "^bench: no torch.compile column: " err) = 1 &&
	! grep "PyTorch compile" out
'

test_expect_success 'AUTOKERNEL_TORCH_COMPILE=0 leaves torch.compile out, and says so' '
	(cd repo && AUTOKERNEL_TORCH_COMPILE=0 git autokernel bench --torch \
		>../nc 2>../err) &&
	grep "^bench: no torch.compile column: AUTOKERNEL_TORCH_COMPILE=0 in the environment" err &&
	torch_rows nc >us && test -s us &&
	! grep "PyTorch compile" nc
'

test_expect_success 'bench --torch --all-shapes: PyTorch at the test shapes too' '
	(cd repo && git autokernel bench --torch --all-shapes >../all 2>../err) &&
	grep -c "^[0-9x]* f32: floor" all >blocks &&
	test $(cat blocks) = 4 &&
	torch_rows all >us && test $(wc -l <us) = 4 &&
	awk "\$1 <= 0 { exit 1 }" us
'

test_expect_success 'bench --torch --json carries the figures' '
	(cd repo && git autokernel bench --torch --json >../b.json) &&
	python3 - <<-\EOF
	import json
	b = json.load(open("b.json"))
	for sh in b["shapes"]:
	    t = sh["torch"]
	    assert t["eager"]["median_us"] > 0 and t["eager"]["n"] > 0, t
	    assert t["vs_eager"] > 0 and "no_compile" in t, t
	    assert t["checked"]["calls"] > 0, t
	assert b["torch_total_us"] > 0, b
	EOF
'

test_expect_success 'bench --torch --record: the figures in the tip note, once per shape' '
	(cd repo && git autokernel bench --torch --record >../rec.out 2>../err) &&
	grep "bench: recorded PyTorch.s figures at 2 shapes in the note of HEAD" err &&
	(cd repo && git notes --ref=autokernel show HEAD >../note) &&
	python3 - <<-\EOF
	import json
	n = json.load(open("note"))
	t = n["torch"]
	assert t["by"] == "git autokernel bench --torch" and t["torch"], t
	assert [s["shape"] for s in t["shapes"]] == ["64x4096", "16x256"], t
	for s in t["shapes"]:
	    assert s["eager"]["median_us"] > 0 and s["kernel_us"] > 0, s
	    assert abs(s["vs_eager"] - s["eager"]["median_us"] / s["kernel_us"]) < 1e-9
	assert n["workload"]["shapes"], "the rest of the note is kept"
	EOF
'

test_expect_success 'report shows the PyTorch column of the per-shape table' '
	(cd repo && git autokernel report >../report.md &&
	 git autokernel report --format json >../report.json) &&
	grep "| PyTorch (us) | vs PyTorch |" report.md &&
	grep "^| 64x4096 | f32 | 0.90 | .* | [0-9.]* | [0-9.]*x |$" report.md &&
	grep "PyTorch is its own op" report.md &&
	python3 - <<-\EOF
	import json
	r = json.load(open("report.json"))
	assert all(s["torch_us"] > 0 and s["vs_torch"] > 0 for s in r["shapes"]), r["shapes"]
	assert r["torch"]["shapes"], r["torch"]
	EOF
'

test_expect_success 'without figures in the note, the report has no PyTorch column' '
	new_repo bare && cd bare &&
	git autokernel start softmax --backend host --problem ../small.json \
		>/dev/null 2>&1 &&
	git autokernel report >../plain.md &&
	grep "### Per shape" ../plain.md && ! grep PyTorch ../plain.md
'

test_expect_success '--record needs --torch and a commit' '
	(cd repo &&
	 test_expect_code 2 git autokernel bench --record 2>../err &&
	 grep "needs --torch" ../err &&
	 test_expect_code 2 git autokernel bench --torch --record --index 2>../err &&
	 grep "bench a revision, not the index" ../err)
'

# every reference at small shapes, f32, on the fake device: a reference
# that computed the op wrongly would fail the harness's checks here
kernel_dirs () {
	for op in softmax layernorm rmsnorm cross_entropy reduce matmul \
		  rotary_embedding flash_attention fused_mlp; do
		mkdir -p ops/$op &&
		small_problem $op |
			sed -e 's/"f16", "bf16", "f32"/"f32"/' >ops/$op/problem.json &&
		cp "$SRC_DIR/kernels/host/$op.c" ops/$op/kernel.c || return 1
	done &&
	mkdir -p ops/half &&
	sed -e 's/"seed": 7/"seed": 7, "layout": "half"/' \
		ops/rotary_embedding/problem.json >ops/half/problem.json &&
	cp ops/rotary_embedding/kernel.c ops/half/
}

test_expect_success 'every op: PyTorch passes the checks of every timed call' '
	kernel_dirs &&
	for d in ops/*/; do
		d=${d%/} &&
		git autokernel bench --torch --json $d >$d.json 2>$d.err &&
		! grep "no PyTorch figure" $d.err &&
		python3 -c "import json, sys; t = json.load(open(\"$d.json\"))[\"torch\"]; \
			assert t[\"eager\"][\"median_us\"] > 0 and t[\"checked\"][\"calls\"] > 0, t" ||
		{ echo "$d:"; cat $d.err; return 1; }
	done
'

test_expect_success 'what torch.compile would compile computes what eager does' '
	"$TORCH_PY" "$TEST_DIR/torch-ref-ops.py" "$SRC_DIR/python" >ops.out ||
	{ grep -v "^ok" ops.out; false; }
'

test_expect_success 'a reference that computes the wrong thing is caught' '
	mkdir data && for d in include kernels hooks; do
		ln -s "$SRC_DIR/$d" data/$d || return 1
	done &&
	cp -R "$SRC_DIR/python" data/python &&
	cat >data/python/torch_ref/softmax.py <<-\EOF &&
	import torch
	def ak_kernel(a):
	    a.out[0].copy_(torch.softmax(a.inp[0] * 1.01, -1))
	EOF
	(cd repo && AUTOKERNEL_HOME="$TRASH/data" git autokernel bench --torch \
		--shape 64x4096 >../bad.out 2>../bad.err) &&
	grep "bench: no PyTorch figure at 64x4096 f32: wrong output of a timed call" bad.err &&
	grep "^  work tree" bad.out && ! grep "^  PyTorch" bad.out
'

test_expect_success 'no torch: the kernel alone, why said once, exit 0' '
	mkdir -p notorch/hide &&
	echo "raise ImportError(\"torch is hidden from this interpreter\")" \
		>notorch/hide/torch.py &&
	printf "#!/bin/sh\nPYTHONPATH=%s exec %s \"\$@\"\n" "$PWD/notorch/hide" \
		"$TORCH_PY" >notorch/python3 &&
	chmod +x notorch/python3 &&
	(cd repo && AUTOKERNEL_PYTHON=../notorch/python3 \
		git autokernel bench --torch --all-shapes >../no.out 2>../no.err) &&
	test $(grep -c "no PyTorch column" no.err) = 1 &&
	grep "^bench: no PyTorch column: \$AUTOKERNEL_PYTHON: cannot import torch: .*torch is hidden" no.err &&
	grep "^  work tree" no.out && ! grep PyTorch no.out
'

test_done
