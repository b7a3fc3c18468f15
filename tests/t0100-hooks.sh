#!/bin/sh
# The git layer, as a user types it: init, start, commits judged by the
# hooks (kept with trailers and a note, or rejected and kept as an
# attempt), chained hooks, core.hooksPath, other branches untouched.
. "$(dirname "$0")/lib.sh"

base="$TEST_DIR/kernels/softmax-f32.c"
small_problem softmax | sed -e 's/"f16", "bf16", "f32"/"f32"/' >small.json
# thirty times the work: the baseline every good candidate beats
sed -e 's|/\* BREAK \*/|{ static int d; if (d < 30) { d++; ak_kernel(a); d--; } }|' \
	"$base" >slow.c
sed -e 's|/\* BREAK \*/||' "$base" >fast.c

test_expect_success 'init installs the three hooks' '
	new_repo r1 && cd r1 &&
	git autokernel init --no-measure &&
	for h in pre-commit commit-msg post-commit; do
		test -x .git/hooks/$h && grep "git autokernel hook" .git/hooks/$h ||
			return 1
	done &&
	git config autokernel.minGain && git config notes.rewriteRef
'

test_expect_success 'init twice changes nothing' '
	cd r1 && cp .git/hooks/pre-commit before &&
	git autokernel init --no-measure && cmp before .git/hooks/pre-commit &&
	test $(git config --get-all notes.rewriteRef | wc -l) = 1
'

test_expect_success 'an existing hook is kept, chained, and still runs' '
	new_repo r2 && cd r2 &&
	printf "#!/bin/sh\necho mine >>../mine.log\n" >.git/hooks/pre-commit &&
	chmod +x .git/hooks/pre-commit &&
	git autokernel init --no-measure >out &&
	grep "kept your pre-commit hook" out &&
	test -x .git/hooks/pre-commit.autokernel-chained &&
	echo x >f && git add f && git commit -q -m plain &&
	grep mine ../mine.log
'

test_expect_success 'a failing chained hook still blocks the commit' '
	cd r2 && printf "#!/bin/sh\nexit 1\n" >.git/hooks/pre-commit.autokernel-chained &&
	echo y >f && git add f && test_must_fail git commit -q -m blocked
'

test_expect_success 'core.hooksPath is honoured, and nothing in it written' '
	new_repo r3 && cd r3 && mkdir myhooks &&
	printf "#!/bin/sh\necho mine >>../mine3.log\n" >myhooks/pre-commit &&
	chmod +x myhooks/pre-commit && cp myhooks/pre-commit ../before &&
	git config core.hooksPath myhooks &&
	git autokernel init --no-measure >out &&
	cmp ../before myhooks/pre-commit && test $(ls myhooks | wc -l) = 1 &&
	grep "left untouched" out &&
	test "$(git config autokernel.userHooksPath)" = myhooks &&
	test -x .git/autokernel/hooks/pre-commit &&
	! test -e .git/hooks/pre-commit &&
	echo x >f && git add f && git commit -q -m plain && grep mine ../mine3.log
'

test_setup 'start makes the branch, the files and the baseline commit' '
	new_repo repo && cd repo &&
	echo "my notes" >untracked.txt &&
	echo "local change" >>README.md &&
	git autokernel start softmax --backend host --from ../slow.c \
		--problem ../small.json >../start.out 2>&1 &&
	test "$(git symbolic-ref --short HEAD)" = autokernel/softmax &&
	test -f softmax/problem.json && test -f softmax/kernel.c &&
	git log -1 --format=%B >../msg &&
	grep "Autokernel-Op: softmax" ../msg &&
	grep "Autokernel-Verify: pass 5/5" ../msg &&
	grep "Autokernel-Speedup: 1.00x" ../msg &&
	git notes --ref=autokernel show HEAD >../note.json &&
	grep "\"status\": \"baseline\"" ../note.json &&
	cd ..
'

test_expect_success 'start kept the user'"'"'s untracked and uncommitted work' '
	cd repo && test "$(cat untracked.txt)" = "my notes" &&
	grep "local change" README.md && git diff --quiet HEAD -- softmax
'

test_expect_success 'start refuses an existing branch' '
	cd repo && test_expect_code 3 git autokernel start softmax \
		--backend host 2>err && grep "already exists" err
'

test_expect_success 'a faster candidate is kept with trailers and a note' '
	cd repo && cp ../fast.c softmax/kernel.c &&
	git commit -q -m "do the work once" softmax/kernel.c 2>../judge.out &&
	git log -1 --format=%B >msg &&
	grep "^do the work once" msg &&
	grep "Autokernel-Time-Us:" msg && grep "Autokernel-Roofline:" msg &&
	grep "Autokernel-Speedup:" msg &&
	git notes --ref=autokernel show HEAD | grep "\"status\": \"kept\"" &&
	grep "verdict: keep" ../judge.out
'

test_expect_success 'a slower candidate is rejected, reset, and recoverable' '
	cd repo && cp ../slow.c softmax/kernel.c && git add softmax/kernel.c &&
	test_must_fail git commit -q -m "back to the slow one" 2>err &&
	grep "rejected" err &&
	git rev-parse --verify refs/autokernel/attempts/softmax/1 &&
	git show refs/autokernel/attempts/softmax/1:softmax/kernel.c >got &&
	cmp got ../slow.c &&
	git log -1 --format=%B refs/autokernel/attempts/softmax/1 | grep "^back to the slow one" &&
	git diff --quiet HEAD -- softmax/kernel.c &&
	for i in 1 2 3 4 5 6 7 8 9 10; do
		git diff --cached --quiet && break; sleep 0.2
	done && git diff --cached --quiet
'

test_expect_success 'a broken candidate is rejected with the compiler error' '
	cd repo && echo "this is not C;" >>softmax/kernel.c &&
	test_must_fail git commit -q -m "broken" softmax/kernel.c 2>err &&
	grep "unable to build .softmax/kernel.c.: cc exited with 1" err &&
	grep "error:" err | grep -v "unable to build" &&
	git rev-parse --verify refs/autokernel/attempts/softmax/2
'

test_expect_success 'a change to problem.json is refused' '
	cd repo && git checkout -q HEAD -- softmax &&
	sed -i "s/\"seed\": 7/\"seed\": 8/" softmax/problem.json &&
	echo "/* x */" >>softmax/kernel.c &&
	test_must_fail git commit -q -m "move the goalposts" softmax 2>err &&
	grep "problem.json is fixed" err && grep "softmax/problem.json" err &&
	git reset -q && git checkout -q HEAD -- softmax
'

test_expect_success 'a commit with --no-verify shows as unverified' '
	cd repo && echo "/* unchecked */" >>softmax/kernel.c &&
	git commit -q --no-verify -m "skipped the hooks" softmax/kernel.c &&
	git autokernel log >log && grep "unverified" log &&
	git reset -q --keep HEAD~1
'

test_expect_success 'log --attempts tells the story of the branch' '
	cd repo && git autokernel log --attempts >log &&
	grep "baseline" log && grep "do the work once" log &&
	grep "back to the slow one" log && grep "broken" log &&
	grep "1 kept\|2 kept" log &&
	git autokernel log --attempts --json >log.json &&
	python3 -c "import json; r=json.load(open(\"log.json\")); \
		assert [x[\"status\"] for x in r][:2] == [\"baseline\", \"kept\"], r"
'

test_expect_success 'plain commits on other branches are not judged' '
	cd repo && git checkout -q main && echo more >other.txt &&
	git add other.txt && git commit -q -m "docs" 2>err &&
	! grep autokernel err &&
	git checkout -q autokernel/softmax
'

test_expect_success 'the user'"'"'s files survived everything' '
	cd repo && test "$(cat untracked.txt)" = "my notes" &&
	grep "local change" README.md
'

test_expect_success 'a commit that deletes the kernel is refused, the deletion kept' '
	cd repo && git rm -q softmax/kernel.c &&
	test_must_fail git commit -q -m "no kernel" 2>err &&
	grep "softmax/kernel.c. is not in the staged tree" err &&
	test "$(git status --porcelain softmax)" = "D  softmax/kernel.c" &&
	git reset -q HEAD -- softmax/kernel.c && git checkout -q -- softmax/kernel.c
'

test_expect_success 'a second run is refused while one holds the lock' '
	cd repo && { sleep 30 & pid=$!; } &&
	mkdir -p .git/autokernel && echo "$pid run" >.git/autokernel/run.lock &&
	test_expect_code 3 git autokernel run --max-experiments 1 2>err &&
	grep "another git autokernel is running" err &&
	kill $pid && rm -f .git/autokernel/run.lock
'

test_expect_success 'a stale lock is taken over' '
	cd repo && echo "999999 run" >.git/autokernel/run.lock &&
	git autokernel run --max-experiments 1 2>err >/dev/null;
	grep "stale lock" err && ! test -e .git/autokernel/run.lock
'

test_done
