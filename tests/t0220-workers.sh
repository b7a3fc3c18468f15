#!/bin/sh
# run --workers: two workers, each in a worktree of its own, draw from one
# search (no configuration twice), land their kept candidates one at a
# time on the branch (a candidate judged against a tip that has moved is
# judged again), stop on Ctrl-C after their experiments in flight or at
# once on a second, and lose nothing when one of them dies.
. "$(dirname "$0")/lib.sh"

small_problem softmax | sed -e 's/"f16", "bf16", "f32"/"f32"/' >small.json
PTY="$TEST_DIR/fixtures/pty-interrupt.py"

# Every experiment of branch $1 (kept commits and attempts) as a line
# "commit parent head-of-its-note status", in ../records.
records () {
	git autokernel log --attempts --json >../log.json &&
	python3 - "$1" >../records <<-\EOF
	import json, subprocess, sys
	def git(*a):
	    return subprocess.run(("git",) + a, capture_output=True,
	                          text=True).stdout.strip()
	for r in json.load(open("../log.json")):
	    c = r["commit"]
	    note = json.loads(git("notes", "--ref=autokernel", "show", c) or "{}")
	    parent = git("rev-parse", "-q", "--verify", c + "^") or "-"
	    print(c, parent, note.get("head") or "-", note.get("status", "none"))
	EOF
}

# No worktree, job ref, pid file or claim outlives the run.
nothing_left () {
	test $(git worktree list | wc -l) = 1 &&
	! ls .git/autokernel/workers | grep -v "^state.lock$\|^land.lock$" &&
	test -z "$(git for-each-ref refs/autokernel/jobs)" &&
	test -z "$(git status --porcelain)" && ! test -e .git/autokernel/run.lock
}

test_setup 'a host softmax branch with 36 configurations' '
	new_repo repo && cd repo &&
	git autokernel start softmax --backend host --problem ../small.json \
		>/dev/null 2>&1 && cd ..
'

test_expect_success 'two workers make ten experiments, no configuration twice' '
	cd repo && git autokernel run --workers 2 --max-experiments 10 \
		--plateau 50 >../out 2>../err &&
	grep "^\[w1 softmax" ../err && grep "^\[w2 softmax" ../err &&
	grep "2 workers made 10 experiments" ../err &&
	records softmax && test $(wc -l <../records) = 11 &&
	for c in $(cut -d" " -f1 ../records); do
		git show $c:softmax/kernel.c | grep "autokernel: tune" |
			awk "{print \$2 \"=\" \$3}" | tr "\n" " "; echo
	done >../configs &&
	test $(sort -u ../configs | wc -l) = 11
'

test_expect_success 'every experiment was judged against its parent' '
	cd repo && records softmax &&
	grep -v " baseline$" ../records >../judged &&
	awk "\$2 != \$3 { print; bad = 1 } END { exit bad }" ../judged &&
	! grep " none$" ../records
'

test_expect_success 'the worktrees are gone and the work tree is at the tip' '
	cd repo && nothing_left &&
	test "$(git rev-parse HEAD)" = "$(git rev-parse autokernel/softmax)" &&
	git diff --quiet autokernel/softmax
'

# A kernel that does its work REPEAT+1 times; the agent halves REPEAT and
# leaves a mark of its own, so two workers propose different kernels that
# are both faster than the baseline, and alike.
sed -e 's|/\* BREAK \*/|{ static int d; if (d < REPEAT) { d++; ak_kernel(a); d--; } }|' \
	"$TEST_DIR/kernels/softmax-f32.c" | sed -e "1i #define REPEAT 32" >slow.c
cat >halve.sh <<'EOF'
#!/bin/sh
n=$(sed -n "s/^#define REPEAT //p" "$AUTOKERNEL_KERNEL")
sed -i "s/^#define REPEAT .*/#define REPEAT $((n / 2))/" "$AUTOKERNEL_KERNEL"
echo "/* $$ $(date +%s%N) */" >>"$AUTOKERNEL_KERNEL"
echo "half the repeats" >"$AUTOKERNEL_MESSAGE"
echo "${AUTOKERNEL_THREADS:-unset} ${OMP_WAIT_POLICY:-unset}" \
	>>"$(dirname "$0")/worker-env"
EOF
chmod +x halve.sh

test_setup 'a branch where every edit is faster' '
	cd repo && git checkout -q main &&
	git autokernel start softmax --name rj --backend host --from ../slow.c \
		--problem ../small.json >/dev/null 2>&1 && cd ..
'

test_expect_success 'a candidate kept against a tip that moved is judged again' '
	cd repo && git autokernel run --workers 2 --max-experiments 2 \
		--agent exec -- "$TRASH/halve.sh" >../out 2>../err &&
	grep "judging it again against the new best" ../err &&
	records rj && test $(wc -l <../records) = 3 &&
	grep -v " baseline$" ../records >../judged &&
	awk "\$2 != \$3 { print; bad = 1 } END { exit bad }" ../judged &&
	test $(git rev-list --count autokernel/rj) -le 4 && nothing_left
'

# Each worker's judge takes its share of the cores; the host backend's
# kernels keep OpenMP's own waiting.
test_expect_success 'each worker gets its share of the cores' '
	n=$(($(nproc) / 2)) && test $n -ge 1 || n=1
	sort -u worker-env >env.seen && echo "$n unset" >env.want &&
	diff -u env.want env.seen
'

cat >slow-agent.sh <<'EOF'
#!/bin/sh
touch "$MARK"
sleep 1
echo "/* experiment $$ $(date +%s%N) */" >>"$AUTOKERNEL_KERNEL"
echo "a comment, slowly" >"$AUTOKERNEL_MESSAGE"
EOF
chmod +x slow-agent.sh

count () {
	git autokernel log --attempts --json |
		python3 -c "import json,sys; print(len(json.load(sys.stdin)))"
}

test_expect_success 'one Ctrl-C stops every worker after its experiment' '
	cd repo && rm -f ../mark && before=$(count) &&
	MARK=$PWD/../mark python3 "$PTY" --wait-for ../mark -- \
		git autokernel run --workers 2 --agent exec -- \
		../slow-agent.sh >../out 2>&1;
	cat ../out &&
	grep "stopping the workers after their experiments in flight" ../out &&
	test $(grep -c "stopping the workers" ../out) = 1 &&
	grep "the tree is clean" ../out &&
	after=$(count) && test $after -ge $((before + 1)) &&
	test $after -le $((before + 2)) && nothing_left
'

test_expect_success 'a second Ctrl-C stops them at once, and leaves nothing' '
	cd repo && rm -f ../mark &&
	MARK=$PWD/../mark python3 "$PTY" --wait-for ../mark --times 2 -- \
		git autokernel run --workers 2 --agent exec -- \
		../slow-agent.sh >../out 2>&1;
	cat ../out && grep "stopped" ../out && nothing_left &&
	! ls .git/worktrees 2>/dev/null | grep .
'

cat >edit-then-wait.sh <<'EOF'
#!/bin/sh
echo "/* edited by $$ */" >>"$AUTOKERNEL_KERNEL"
echo "an edit that waits" >"$AUTOKERNEL_MESSAGE"
touch "$MARK.$$"
sleep 2
EOF
chmod +x edit-then-wait.sh

test_expect_success 'a worker killed mid-experiment loses nothing, stops no other' '
	cd repo && rm -f ../mark.* && before=$(count) &&
	{ MARK=$PWD/../mark git autokernel run --workers 2 --max-experiments 6 \
		--agent exec -- ../edit-then-wait.sh >../out 2>../err & } &&
	i=0 && while ! ls ../mark.* >/dev/null 2>&1; do
		i=$((i + 1)); test $i -lt 600 || exit 1; sleep 0.1
	done &&
	kill -KILL $(cat .git/autokernel/workers/1.pid) &&
	wait &&
	cat ../err &&
	grep "worker 1 was killed by signal 9" ../err &&
	grep "worker 1 started again" ../err &&
	grep "saved as an attempt" ../err &&
	git for-each-ref --format="%(refname)" "refs/autokernel/attempts/rj/*" >../refs &&
	for r in $(cat ../refs); do
		git notes --ref=autokernel show $r 2>/dev/null |
			grep -q "\"reason\": \"interrupted\"" &&
			git show $r:rj/kernel.c | grep -q "edited by" && echo $r
	done >../interrupted;
	test $(wc -l <../interrupted) = 1 &&
	test $(count) = $((before + 6)) && nothing_left
'

# The killed run's workers get SIGTERM and stop, saving what they were
# judging: the next run, started at once, waits for them (however long
# that takes on a loaded machine) before it touches their worktrees.
test_expect_success 'worktrees left by a killed run are recovered by the next' '
	cd repo && rm -f ../mark &&
	{ MARK=$PWD/../mark git-autokernel run --workers 2 --agent exec -- \
		../slow-agent.sh >../out 2>../err & pid=$!; } &&
	i=0 && while ! test -e ../mark; do
		i=$((i + 1)); test $i -lt 600 || exit 1; sleep 0.1
	done &&
	kill -KILL $pid && wait $pid;
	test -d .git/autokernel/workers/1 &&
	git autokernel run --workers 2 --max-experiments 1 --agent exec -- \
		../slow-agent.sh >../out 2>../err ||
	{ cat ../out ../err; false; } &&
	grep "left from a run that was killed" ../err &&
	nothing_left || { cat ../err; false; }
'

test_expect_success 'and waits for a worker of the killed run still stopping' '
	cd repo && mkdir -p .git/autokernel/workers/1 &&
	{ sh -c "cd .git/autokernel/workers/1 && exec sleep 3" & p=$!; } &&
	i=0 && while ! test "$(readlink /proc/$p/cwd)" = \
		"$(cd .git/autokernel/workers/1 && pwd -P)"; do
		i=$((i + 1)); test $i -lt 100 || exit 1; sleep 0.05
	done &&
	echo $p >.git/autokernel/workers/1.pid &&
	git autokernel run --workers 2 --max-experiments 1 --agent exec -- \
		../slow-agent.sh >../out 2>../err &&
	grep "worker 1 of the killed run (pid $p) is still stopping: waiting" \
		../err && nothing_left || { cat ../err; false; }
'

test_expect_success '--gpus on the host backend says what to use' '
	cd repo && test_expect_code 3 git autokernel run --gpus 0,1 2>../err &&
	grep "the host backend has no GPUs: use --workers N" ../err &&
	test_expect_code 2 git autokernel run --workers 0 2>../err &&
	grep "workers wants a number" ../err
'

test_done
