#!/bin/sh
# report turns a branch's history into a pull-request body: markdown with
# the summary, kept experiments and rejected counts; a standalone SVG
# progress plot; the same data as JSON.
. "$(dirname "$0")/lib.sh"

# One thread: on a loaded machine OpenMP's barriers make host timings
# noisier than the differences these tests plant.
export OMP_NUM_THREADS=1
K=softmax/kernel.c
starter="$SRC_DIR/kernels/host/softmax.c"

# wrap FILE N [STATEMENT]: the kernel in FILE runs N times per call, then
# STATEMENT
wrap () {
	sed -i "s/^int ak_kernel(/static int ak_kernel_once(/" "$1" &&
	cat >>"$1" <<-EOF
	#include <string.h>
	int ak_kernel(const struct ak_args *a)
	{
		int rc = 0;

		for (int rep = 0; rep < $2 && !rc; rep++)
			rc = ak_kernel_once(a);
		${3:-}
		return rc;
	}
	EOF
}

# reject MESSAGE: the commit is refused; the kernel goes back to HEAD's
reject () {
	test_must_fail git commit -q -am "$1" 2>>reject.log &&
	git checkout HEAD -- $K
}

test_setup 'a branch with kept and rejected experiments' '
	new_repo repo &&
	small_problem softmax | sed -e "s/\"64x4096\"/\"16x1024\"/" \
		>small.json &&
	cp "$starter" slow.c && wrap slow.c 20 &&
	cd repo &&
	git autokernel start softmax --backend host --problem ../small.json \
		--from ../slow.c >/dev/null 2>&1 &&
	git config autokernel.resetOnFail false &&
	base=$(git rev-parse HEAD) &&
	cp "$starter" $K &&
	git commit -q -am "drop the 20 repeats" 2>commit.log &&
	best=$(git rev-parse HEAD) &&
	test "$best" != "$base" &&
	echo "this is not C;" >>$K &&
	reject "a kernel that does not build" &&
	wrap $K 1 "memset(a->out[0].data, 0, 4);" &&
	reject "a kernel that is wrong" &&
	wrap $K 50 &&
	reject "fifty times over" &&
	echo "/* a note */" >>$K &&
	git commit -q --no-verify -am "a comment, unverified"
'

test_expect_success 'the markdown has the summary and the tables' '
	git autokernel report >report.md &&
	grep "^## autokernel/softmax: softmax, the tip unverified, on " \
		report.md &&
	grep "^| bench shape | 16x1024 f16 |" report.md &&
	grep "^| dtypes verified | f16, bf16, f32 |" report.md &&
	grep "^| device | .*(host" report.md &&
	grep "^| tool | git-autokernel " report.md &&
	grep "^| baseline | .${base%${base#???????}}. |" report.md &&
	grep "^| \*\*best\*\* | .${best%${best#???????}}. |" report.md &&
	grep "^| floor: copy" report.md &&
	grep "^### Kept experiments" report.md &&
	grep "^| 1 | .${best%${best#???????}}. | .* | drop the 20 repeats |" \
		report.md &&
	grep "^| 5 | .* | unverified | .* | a comment, unverified |" \
		report.md &&
	grep "^### Rejected attempts" report.md &&
	grep "^| reason | build | verify | slower | noise | bench | agent | scope | total |" \
		report.md &&
	grep "^| attempts | 1 | 1 | 1 | 0 | 0 | 0 | 0 | 3 |" report.md &&
	grep "^### Per shape" report.md &&
	grep "^| 16x1024 | f16 | 1.00 | " report.md &&
	grep "^git autokernel bench ${best%${best#????????????}} --against ${base%${base#????????????}}" \
		report.md
'

test_expect_success 'report -o writes the plot beside the markdown' '
	mkdir -p ../out &&
	git autokernel report -o ../out/report.md 2>err &&
	grep "wrote ../out/report.md and ../out/report.svg" err &&
	test -f ../out/report.svg &&
	grep "](report.svg)" ../out/report.md
'

test_expect_success 'the plot is standalone SVG with a frontier' '
	svg=../out/report.svg &&
	python3 -c "import xml.dom.minidom,sys; xml.dom.minidom.parse(sys.argv[1])" $svg &&
	grep "xmlns=\"http://www.w3.org/2000/svg\"" $svg &&
	grep "id=\"frontier\"" $svg &&
	grep "id=\"baseline\"" $svg &&
	grep "id=\"floor\"" $svg &&
	test $(grep -c "class=\"kept\"" $svg) = 2 &&
	test $(grep -c "class=\"rejected\"" $svg) = 1 &&
	test $(grep -c "class=\"failed\"" $svg) = 2 &&
	! grep -i "href\|<image\|@import\|url(" $svg
'

test_expect_success 'report --format svg prints the plot' '
	git autokernel report --format svg >plot.svg &&
	python3 -c "import xml.dom.minidom,sys; xml.dom.minidom.parse(sys.argv[1])" plot.svg
'

test_expect_success 'report --format json has the same data' '
	git autokernel report --format json >r.json &&
	python3 - "$base" "$best" <<-\EOF
	import json, sys
	r = json.load(open("r.json"))
	assert r["baseline"]["commit"] == sys.argv[1], r["baseline"]
	assert r["best"]["commit"] == sys.argv[2], r["best"]
	assert r["best"]["speedup"] > 3, r["best"]
	assert r["counts"] == {"experiments": 6, "kept": 1, "rejected": 3,
			       "unverified": 1}, r["counts"]
	rej = r["rejected"]
	assert (rej["build"], rej["verify"], rej["slower"], rej["total"]) == \
		(1, 1, 1, 3), rej
	assert [e["status"] for e in r["experiments"]] == ["baseline", "kept",
		"rejected", "rejected", "rejected", "unverified"]
	assert r["floor"]["time_us"] > 0 and r["shape"] == "16x1024"
	assert [x["shape"] for x in r["shapes"]] == ["16x1024"], r["shapes"]
	assert r["references"] == []
	assert any("bench" in c and "--against" in c for c in r["reproduce"])
	EOF
'

test_expect_success 'references and per-shape timings from the note' '
	git notes --ref=autokernel show $best >note.json &&
	python3 - <<-\EOF &&
	import json
	n = json.load(open("note.json"))
	n["references"] = [{"name": "torch.softmax", "median_us": 50.0}]
	n["workload"]["shapes"] = [{"shape": "16x256", "dtype": "f16",
		"weight": 0.25, "floor_us": 3.8,
		"kernels": [{"median_us": 9.5, "roofline": 0.4}]},
		n["workload"]["shapes"][0]]
	json.dump(n, open("note.json", "w"))
	EOF
	git notes --ref=autokernel add -f -F note.json $best &&
	git autokernel report >report.md &&
	grep "^| reference: torch.softmax |  | 50.00 |" report.md &&
	grep "^| 16x256 | f16 | 0.25 | 9.50 | - |  | 40% |" report.md &&
	grep "weighted total over these shapes" report.md
'

test_expect_success 'report needs an autokernel branch' '
	git checkout -q main &&
	test_expect_code 3 git autokernel report 2>err &&
	grep "not on an autokernel" err &&
	git checkout -q autokernel/softmax
'

test_done
