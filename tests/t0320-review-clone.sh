#!/bin/sh
# A reviewer's view of a branch: a clone without the notes reads the
# trailers; after init --share and a fetch the remote's notes and attempts
# show; a rebase keeps the attempts; the report leads with the tip, shows
# the tolerances and the figure that decided each experiment.
. "$(dirname "$0")/lib.sh"

export OMP_NUM_THREADS=1
K=softmax/kernel.c

# repeat N: the test kernel, doing its work N more times a call
repeat () {
	sed -e "s|/\* BREAK \*/|{ static int d; if (d < $1) { d++; \
ak_kernel(a); d--; } }|" "$TEST_DIR/kernels/softmax-f32.c"
}

# reject MESSAGE: the commit is refused; the kernel goes back to HEAD's
reject () {
	test_must_fail git commit -q -am "$1" 2>>../reject.log &&
	git checkout HEAD -- $K
}

# edit_note REV PYTHON: runs PYTHON on n, the note of REV, and stores it
edit_note () {
	git notes --ref=autokernel show "$1" >../note.json &&
	python3 -c "import json; n = json.load(open('../note.json')); $2;
json.dump(n, open('../note.json', 'w'))" &&
	git notes --ref=autokernel add -f -F ../note.json "$1"
}

# short REV: the seven-digit id
short () {
	git rev-parse --short=7 "$1"
}

test_setup 'an author'"'"'s branch: a baseline, a kept commit, 3 rejected' '
	new_repo author &&
	small_problem softmax | sed -e "s/\"64x4096\"/\"16x1024\"/" \
		-e "s/\"f16\", \"bf16\", \"f32\"/\"f32\"/" >small.json &&
	repeat 20 >slow.c && repeat 0 >fast.c && repeat 50 >fifty.c &&
	repeat 40 >forty.c &&
	(cd author &&
	 git autokernel start softmax --backend host --problem ../small.json \
		--from ../slow.c >/dev/null 2>&1 &&
	 git config autokernel.resetOnFail false &&
	 cp ../fast.c $K &&
	 git commit -q -am "do the work once" 2>../commit.log &&
	 echo "this is not C;" >>$K && reject "does not build" &&
	 cp ../fifty.c $K && reject "fifty times over" &&
	 cp ../forty.c $K && reject "forty times over" &&
	 git rev-parse --verify refs/autokernel/attempts/softmax/3) &&
	best=$(cd author && git rev-parse HEAD)
'

test_expect_success 'init --share of no such remote changes nothing' '
	git clone -q author noremote && cd noremote &&
	git config --list >../config.before &&
	test_expect_code 3 git autokernel init --no-measure \
		--share nosuchremote 2>err &&
	grep "no remote .nosuchremote." err &&
	! test -e .git/hooks/pre-commit &&
	git config --list >../config.after &&
	diff ../config.before ../config.after
'

test_setup 'a reviewer'"'"'s clone, without the notes' '
	git clone -q author review &&
	(cd review && git checkout -q autokernel/softmax &&
	 test_must_fail git rev-parse -q --verify refs/notes/autokernel)
'

test_expect_success 'log reads a clone'"'"'s verdicts from the trailers' '
	cd review && git autokernel log >log 2>err &&
	! grep unverified log &&
	grep "^   1  $(short HEAD) .* kept .* [0-9.]*x .* do the work once" \
		log &&
	grep "warning: 2 experiments .* no note in refs/notes/autokernel" err &&
	test $(grep -c "^hint: fetch the notes" err) = 1 &&
	spec=+refs/notes/autokernel:refs/notes/remotes/origin/autokernel &&
	grep "git fetch origin $spec" err
'

test_expect_success 'report reads the speedup and device from the trailers' '
	cd review && git autokernel report >report.md 2>err &&
	grep "^## autokernel/softmax: softmax [0-9.]*x faster on [A-Za-z]" \
		report.md &&
	! grep "?, no faster" report.md &&
	grep "^| bench shape | 16x1024 f32 |" report.md &&
	test $(grep -c "^hint: fetch the notes" err) = 1
'

test_expect_success 'after init --share and fetch, log shows the attempts' '
	cd review &&
	git autokernel init --no-measure --share origin >/dev/null &&
	git fetch -q origin &&
	git autokernel log --attempts >log 2>err &&
	! grep "no note" err &&
	grep "autokernel/softmax: 2 kept, 3 rejected" log &&
	grep " origin/1  *rejected  build .* does not build" log &&
	grep " origin/2  *rejected  slower .* fifty times over" log
'

test_expect_success 'the fetched notes are read, ours left alone' '
	cd review && git autokernel log --attempts --json >log.json &&
	test_must_fail git rev-parse -q --verify refs/notes/autokernel &&
	python3 - <<-\EOF
	import json
	r = json.load(open("log.json"))
	assert [x["source"] for x in r] == ["note"] * 5, r
	assert r[2]["reason"] == "build" and "verdict" in r[2], r[2]
	assert r[3]["ref"] == \
		"refs/autokernel/remotes/origin/attempts/softmax/2", r[3]
	EOF
'

test_expect_success 'report counts the fetched attempts' '
	cd review && git autokernel report --format json >r.json &&
	python3 -c "import json; r = json.load(open(\"r.json\")); \
		assert r[\"counts\"][\"rejected\"] == 3, r[\"counts\"]"
'

test_expect_success 'an attempt number in the log is one git show finds' '
	cd author && git autokernel log --attempts >log &&
	line=$(grep "fifty times over" log) &&
	n=$(echo "$line" | awk "{print \$3}") &&
	test "$n" = 2 &&
	git show -s --format=%s refs/autokernel/attempts/softmax/$n >subject &&
	grep "^fifty times over" subject &&
	echo "$line" | grep " $(short refs/autokernel/attempts/softmax/$n) "
'

# rebase_on_main REPO [CONFIG]: in a copy of the author's repository, a
# commit on main and the branch rebased onto it (git -c CONFIG rebase)
rebase_on_main () {
	cp -R author "$1" && cd "$1" &&
	git checkout -q main && echo more >other.txt && git add other.txt &&
	git commit -q -m "main moves on" &&
	git checkout -q autokernel/softmax &&
	git -c "${2:-core.abbrev=7}" rebase -q main 2>/dev/null &&
	test "$(git rev-parse HEAD)" != "$best"
}

test_expect_success 'after a rebase the attempts follow the commits' '
	rebase_on_main rebased &&
	git autokernel log --attempts >log &&
	grep "autokernel/softmax: 2 kept, 3 rejected" log &&
	grep "^   2  .* 1  *rejected  build" log
'

test_expect_success 'after a rebase that left the notes behind, too' '
	rebase_on_main rebased-nonotes notes.rewrite.rebase=false &&
	test_must_fail git notes --ref=autokernel show HEAD &&
	git autokernel log --attempts >log 2>err &&
	grep "autokernel/softmax: 2 kept, 3 rejected" log
'

test_expect_success 'an unverified tip leads the headline; the best is named' '
	cp -R author noverify && cd noverify &&
	echo "/* slower, unmeasured */" >>$K &&
	git commit -q --no-verify -am "unmeasured" &&
	git autokernel report >report.md 2>err &&
	grep "^## autokernel/softmax: softmax, the tip unverified, on " \
		report.md &&
	! grep "^## .*x faster" report.md &&
	tip=$(short HEAD) best=$(short HEAD~1) &&
	grep "^> \*\*Warning:\*\* the tip $tip is unverified.*$best" \
		report.md &&
	grep "warning: the tip $tip is unverified" err &&
	grep "^| \*\*tip\*\* (what merges), unverified | .$tip. |" report.md
'

test_expect_success 'a tip slower than the best leads with its own figure' '
	cp -R author slowtip && cd slowtip &&
	echo "/* slower */" >>$K &&
	git commit -q --no-verify -am "slower" &&
	git notes --ref=autokernel show HEAD~1 >../best.json &&
	python3 -c "import json; n = json.load(open(\"../best.json\")); \
		n[\"time_us\"] *= 16; n[\"speedup\"] = 1.01; \
		json.dump(n, open(\"../best.json\", \"w\"))" &&
	git notes --ref=autokernel add -F ../best.json HEAD &&
	git autokernel report >report.md 2>err &&
	grep "^## autokernel/softmax: softmax 1.01x faster on " report.md &&
	tip=$(short HEAD) best=$(short HEAD~1) &&
	grep "Warning:\*\* the tip $tip, 1.01x .* not the fastest.*: $best" \
		report.md &&
	grep "warning: the tip $tip, 1.01x" err
'

test_expect_success 'log shows the ratio that decided, as vs best' '
	cd author && git autokernel log --attempts >log &&
	grep "time(us)  speedup  vs best" log &&
	git autokernel log --attempts --json >log.json &&
	git notes --ref=autokernel show refs/autokernel/attempts/softmax/2 \
		>../a2.json &&
	python3 - <<-\EOF
	import json
	r = json.load(open("log.json"))
	n = json.load(open("../a2.json"))
	k = n["bench"]["kernels"]
	a = [x for x in r if x.get("attempt") == 2][0]
	want = k[1]["median_us"] / k[0]["median_us"]
	assert abs(a["head_ratio"] - want) < 1e-9 and want < 0.5, (a, want)
	assert "head_ratio" not in r[0], r[0]
	assert r[1]["head_ratio"] > 1, r[1]
	EOF
'

test_expect_success 'an older note that lost within the noise says noise' '
	cp -R author noise && cd noise &&
	verdict="not faster: 99.00 us vs 98.00 us (+1.0%), within the noise" &&
	edit_note refs/autokernel/attempts/softmax/3 \
		"n[\"reason\"] = \"slower\"; n[\"verdict\"] = \"$verdict\"" &&
	git autokernel log --attempts >log &&
	grep " 3  *rejected  noise .* forty times over" log &&
	git autokernel report >report.md &&
	grep "^| attempts | 1 | 0 | 1 | 1 | 0 | 0 | 0 | 3 |" report.md
'

test_expect_success 'a rejection is plotted and listed against its best' '
	cp -R author plot && cd plot &&
	t=$(git notes --ref=autokernel show HEAD | python3 -c \
		"import json, sys; print(json.load(sys.stdin)[\"time_us\"])") &&
	edit_note refs/autokernel/attempts/softmax/3 "n[\"time_us\"] = $t * 0.9;
n[\"speedup\"] *= 1000; n[\"bench\"][\"kernels\"][0][\"median_us\"] = 100.0;
n[\"bench\"][\"kernels\"][1][\"median_us\"] = 99.0;
n[\"head_ratio\"] = 0.99" &&
	git autokernel log --attempts >log &&
	grep " 3  *rejected  slower  *[0-9.]*  *-  *0.99x .* forty times" log &&
	git autokernel report --format json >r.json &&
	git autokernel report --format svg >plot.svg &&
	a3=$(short refs/autokernel/attempts/softmax/3) &&
	python3 - "$(short HEAD)" "$a3" <<-\EOF
	import json, sys, xml.dom.minidom
	r = json.load(open("r.json"))
	a = [x for x in r["experiments"] if x.get("attempt") == 3][0]
	assert a["plot_us"] > r["best"]["time_us"], (a, r["best"])
	assert a["speedup"] < r["best"]["speedup"], (a, r["best"])
	cy = {}
	svg = xml.dom.minidom.parse("plot.svg")
	for c in svg.getElementsByTagName("circle"):
	    t = c.getElementsByTagName("title")
	    if t:
	        key = t[0].firstChild.data.split()[1]
	        cy[key] = float(c.getAttribute("cy"))
	assert cy[sys.argv[2]] < cy[sys.argv[1]], cy
	EOF
'

test_expect_success 'report shows the tolerances and warns of a loose one' '
	cd author && git checkout -q main &&
	sed -e "s/\"seed\": 7/\"seed\": 7, \"tolerances\": \
{\"f32\": {\"atol\": 1e9, \"rtol\": 0.001}}/" ../small.json >../loose.json &&
	git autokernel start softmax --name loose --backend host \
		--problem ../loose.json >/dev/null 2>start.err &&
	git autokernel report >report.md 2>err &&
	grep "warning: loose/problem.json: the f32 tolerance (atol 1e+09, \
rtol 0.001) is looser than softmax.s default (atol" err &&
	grep "^| tolerances (atol + rtol \* \\\\|ref\\\\|) | f32 atol 1e+09 \
rtol 0.001 (\*\*looser\*\* than the op.s atol" report.md &&
	git autokernel report --format json >r.json &&
	python3 -c "import json; \
		t = json.load(open(\"r.json\"))[\"tolerances\"]; \
		assert list(t) == [\"f32\"] and t[\"f32\"][\"looser\"], t"
'

test_expect_success 'start, and the hook that judges the baseline, warn of it' '
	cd author &&
	w="warning: loose/problem.json: the f32 tolerance (atol 1e+09, rtol 0.001)" &&
	sed -n "/autokernel: judging/q;p" start.err | grep -F "$w" &&
	sed -n "/autokernel: judging/,\$p" start.err | grep -F "$w"
'

test_done
