#!/bin/sh
# Everyday git on an experiment branch: a tracked core.hooksPath, merges,
# an amend that rewords, a tree judged before, --no-verify, two runs at
# once, and the small things a user types wrong.
. "$(dirname "$0")/lib.sh"

base="$TEST_DIR/kernels/softmax-f32.c"
small_problem softmax | sed -e 's/"f16", "bf16", "f32"/"f32"/' >small.json
sed -e 's|/\* BREAK \*/|{ static int d; if (d < 30) { d++; ak_kernel(a); d--; } }|' \
	"$base" >slow.c
sed -e 's|/\* BREAK \*/||' "$base" >fast.c
PTY="$TEST_DIR/fixtures/pty-interrupt.py"

test_setup 'a repository whose hooks are tracked in the work tree' '
	new_repo repo && cd repo && mkdir hooks &&
	printf "#!/bin/sh\necho tracked-hook-ran >>../tracked.log\n" >hooks/pre-commit &&
	chmod +x hooks/pre-commit && git add hooks &&
	git commit -q -m "our hooks" && git config core.hooksPath hooks &&
	git autokernel init --no-measure >../init.out && cd ..
'

test_expect_success 'init writes nothing into the tracked hooks directory' '
	cd repo && git status --porcelain >../status && test_must_fail test -s ../status &&
	git diff --quiet HEAD -- hooks && grep "left untouched" ../init.out
'

test_expect_success 'the tracked hook still runs, and the branch is judged' '
	cd repo && rm -f ../tracked.log &&
	git autokernel start softmax --backend host --from ../slow.c \
		--problem ../small.json >/dev/null 2>&1 &&
	grep tracked-hook-ran ../tracked.log &&
	git notes --ref=autokernel show HEAD | grep "\"status\": \"baseline\"" &&
	cp ../fast.c softmax/kernel.c && git commit -q -am "fast" 2>../err &&
	git notes --ref=autokernel show HEAD | grep "\"status\": \"kept\""
'

test_expect_success 'run works on it: the tree is clean' '
	cd repo && git autokernel run --max-experiments 1 >/dev/null 2>../err;
	! grep "changes to tracked files" ../err
'

test_expect_success 'merging main into the branch goes through, unjudged' '
	cd repo && git checkout -q main && echo "more docs" >>README.md &&
	git commit -q -am "docs on main" && git checkout -q autokernel/softmax &&
	git merge -q --no-edit main 2>../err &&
	grep "not judged" ../err &&
	test "$(git log -1 --format=%s)" = "Merge branch '"'"'main'"'"' into autokernel/softmax" &&
	grep "more docs" README.md
'

test_expect_success 'a merge that changes the kernel is refused with what to do' '
	cd repo && git checkout -q -b side main &&
	mkdir -p softmax && git show autokernel/softmax:softmax/kernel.c >softmax/kernel.c &&
	echo "/* from side */" >>softmax/kernel.c &&
	git show autokernel/softmax:softmax/problem.json >softmax/problem.json &&
	git add softmax && git commit -q -m "side kernel" &&
	git checkout -q autokernel/softmax &&
	test_must_fail git merge -q --no-edit -X theirs side 2>../err &&
	grep "is no candidate" ../err && grep "git checkout HEAD -- softmax/" ../err &&
	git merge --abort
'

test_expect_success 'an amend that only rewords keeps the result' '
	cd repo && git reset -q --hard HEAD~1 2>/dev/null;
	git log -1 --format=%B >../before &&
	grep "Autokernel-Time-Us" ../before &&
	git commit -q --amend -m "fast, in better words" 2>../err &&
	git log -1 --format=%B >../after &&
	grep "^fast, in better words" ../after &&
	grep "Autokernel-Time-Us" ../after &&
	git notes --ref=autokernel show HEAD | grep "\"status\": \"kept\""
'

test_expect_success 'a tree judged before says its verdict is cached' '
	cd repo && cp ../slow.c softmax/kernel.c &&
	test_must_fail git commit -q -am "slow" 2>../err1 &&
	cp ../slow.c softmax/kernel.c &&
	test_must_fail git commit -q -am "slow again" 2>../err2 &&
	grep "cached verdict from 20" ../err2 && grep "autokernel.rejudge" ../err2
'

test_expect_success 'autokernel.rejudge measures it again, as a new attempt' '
	cd repo && n=$(git for-each-ref "refs/autokernel/attempts/softmax/*" | wc -l) &&
	cp ../slow.c softmax/kernel.c &&
	test_must_fail git -c autokernel.rejudge=true commit -q -am "slow, once more" 2>../err &&
	grep "judging again" ../err && ! grep "cached verdict" ../err &&
	test $(git for-each-ref "refs/autokernel/attempts/softmax/*" | wc -l) = $((n + 1)) &&
	cp ../slow.c softmax/kernel.c &&
	test_must_fail env AUTOKERNEL_REJUDGE=1 git commit -q -am "and again" 2>../err &&
	grep "judging again" ../err
'

test_expect_success '--no-verify of a rejected tree does not inherit its note' '
	cd repo && cp ../slow.c softmax/kernel.c &&
	git commit -q --no-verify -am "slow, unchecked" &&
	test_must_fail git notes --ref=autokernel show HEAD 2>/dev/null &&
	git autokernel log >../log && grep "unverified" ../log &&
	git reset -q --hard HEAD~1
'

cat >comment.sh <<'EOF2'
#!/bin/sh
echo "/* experiment $(date +%s%N) */" >>"$AUTOKERNEL_KERNEL"
echo "a comment" >"$AUTOKERNEL_MESSAGE"
EOF2
chmod +x comment.sh

test_expect_success 'two worktrees running at once both land every note' '
	cd repo && git checkout -q main &&
	git autokernel start softmax --name sm2 --backend host --from ../slow.c \
		--problem ../small.json >/dev/null 2>&1 &&
	git checkout -q main && git worktree add -q ../wt2 autokernel/sm2 &&
	git worktree add -q ../wt1 autokernel/softmax &&
	{ (cd ../wt1 && git autokernel run --agent exec --max-experiments 3 \
		-- ../comment.sh >/dev/null 2>&1) & } &&
	{ (cd ../wt2 && git autokernel run --agent exec --max-experiments 3 \
		-- ../comment.sh >/dev/null 2>&1) & } &&
	wait &&
	for b in softmax sm2; do
		for c in $(git rev-list autokernel/$b) $(git for-each-ref --format="%(objectname)" "refs/autokernel/attempts/$b/*"); do
			git log -1 --format=%s $c | grep -q "^Merge\|^our hooks\|^initial\|^docs" && continue
			git notes --ref=autokernel show $c >/dev/null 2>&1 || { echo "no note on $c"; exit 1; }
		done
	done &&
	test $(git rev-list --count autokernel/sm2) -gt 2 ||
	test $(git for-each-ref "refs/autokernel/attempts/sm2/*" | wc -l) -ge 1
'

test_expect_success 'bad numbers for run are refused, not taken as no limit' '
	cd repo && git checkout -q autokernel/softmax 2>/dev/null || true;
	cd ../wt1 &&
	test_expect_code 2 git autokernel run --max-experiments abc 2>../err &&
	grep "max-experiments wants a number" ../err &&
	test_expect_code 2 git autokernel run --max-experiments 0 2>../err &&
	test_expect_code 2 git autokernel run --budget 1e99h 2>../err &&
	grep "at most a year" ../err
'

test_expect_success 'verify of an unknown revision says so, and only that' '
	cd wt1 && test_expect_code 2 git autokernel verify nosuch 2>../err &&
	grep "unknown revision .nosuch." ../err && ! grep runner ../err
'

test_expect_success 'a compiler error names the kernel by its path in the repository' '
	cd wt1 && echo "this is not C;" >>softmax/kernel.c &&
	test_must_fail git commit -q -am broken 2>../err &&
	grep "softmax/kernel.c:[0-9]" ../err && ! grep "tmp-" ../err
'

cat >slow-agent.sh <<'EOF2'
#!/bin/sh
sleep 0.3
echo "/* experiment $(date +%s%N) */" >>"$AUTOKERNEL_KERNEL"
echo "a comment" >"$AUTOKERNEL_MESSAGE"
EOF2
chmod +x slow-agent.sh

test_expect_success 'on a terminal, run shows the phase of the experiment in flight' '
	cd wt1 && git reset -q --hard &&
	python3 "$PTY" --times 0 -- git autokernel run --agent exec \
		--max-experiments 2 -- ../slow-agent.sh >../out 2>&1 &&
	grep "judging: \(building\|stage [1-5]/5\|benchmark\)" ../out
'

test_done
