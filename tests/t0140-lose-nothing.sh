#!/bin/sh
# Nothing of the user's is lost: a rejection leaves unstaged edits where
# they were (and saves them), Ctrl-C through `git autokernel run` stops
# after the experiment in flight, and no temporary directory outlives
# the tool, whatever kills it.
. "$(dirname "$0")/lib.sh"

base="$TEST_DIR/kernels/softmax-f32.c"
small_problem softmax | sed -e 's/"f16", "bf16", "f32"/"f32"/' >small.json
sed -e 's|/\* BREAK \*/|{ static int d; if (d < 30) { d++; ak_kernel(a); d--; } }|' \
	"$base" >slow.c
sed -e 's|/\* BREAK \*/||' "$base" >fast.c

test_setup 'a branch' '
	new_repo repo && cd repo &&
	git autokernel start softmax --backend host --from ../fast.c \
		--problem ../small.json >/dev/null 2>&1 && cd ..
'

test_expect_success 'an unstaged edit survives the rejection of the staged one' '
	cd repo && cp ../slow.c softmax/kernel.c && git add softmax/kernel.c &&
	echo "/* my unstaged line */" >>softmax/kernel.c &&
	test_must_fail git commit -q -m "slower, staged" 2>../err &&
	grep "rejected" ../err &&
	grep "has changes that were not staged" ../err &&
	grep "my unstaged line" softmax/kernel.c &&
	n=$(git for-each-ref --format="%(refname)" "refs/autokernel/attempts/softmax/*-worktree" | wc -l) &&
	test "$n" = 1 &&
	ref=$(git for-each-ref --format="%(refname)" "refs/autokernel/attempts/softmax/*-worktree") &&
	git show "$ref:softmax/kernel.c" >../saved &&
	cmp ../saved softmax/kernel.c &&
	git show "${ref%-worktree}:softmax/kernel.c" >../judged &&
	cmp ../judged ../slow.c &&
	git diff --cached --quiet HEAD -- softmax/kernel.c &&
	git checkout -q HEAD -- softmax/kernel.c
'

test_expect_success 'the work-tree copy is no attempt of its own' '
	cd repo && git autokernel log --attempts >../log &&
	test $(grep -c "^ *[0-9].* rejected " ../log) = 1
'

test_expect_success 'with nothing unstaged, the kernel is reset as before' '
	cd repo && cp ../slow.c softmax/kernel.c &&
	test_must_fail git commit -q -a -m "slower again" 2>../err &&
	! grep "not staged" ../err &&
	git diff --quiet HEAD -- softmax/kernel.c
'

cat >slow-agent.sh <<'EOF2'
#!/bin/sh
touch "$MARK"
sleep 1
echo "/* experiment $(date +%s%N) */" >>"$AUTOKERNEL_KERNEL"
echo "a comment, slowly" >"$AUTOKERNEL_MESSAGE"
EOF2
chmod +x slow-agent.sh
PTY="$TEST_DIR/fixtures/pty-interrupt.py"

test_expect_success 'one Ctrl-C through git stops after the experiment in flight' '
	cd repo && rm -f ../mark && before=$(git autokernel log --attempts --json |
		python3 -c "import json,sys; print(len(json.load(sys.stdin)))") &&
	MARK=$PWD/../mark python3 "$PTY" --wait-for ../mark -- \
		git autokernel run --agent exec --max-experiments 5 -- \
		../slow-agent.sh >../out 2>&1;
	cat ../out &&
	grep "stopping after this experiment" ../out &&
	! grep "waitpid" ../out && ! grep "Ctrl-C again" ../out.2 2>/dev/null &&
	grep "#$before \(kept\|rejected\)" ../out &&
	after=$(git autokernel log --attempts --json |
		python3 -c "import json,sys; print(len(json.load(sys.stdin)))") &&
	test "$after" = $((before + 1)) &&
	git diff --quiet HEAD && git diff --cached --quiet &&
	! ls .git/autokernel | grep "^tmp-" && ! test -e .git/autokernel/run.lock
'

test_expect_success 'a second Ctrl-C stops at once and still leaves nothing behind' '
	cd repo && rm -f ../mark &&
	MARK=$PWD/../mark python3 "$PTY" --wait-for ../mark --times 2 -- \
		git autokernel run --agent exec --max-experiments 5 -- \
		../slow-agent.sh >../out 2>&1;
	cat ../out &&
	grep "stopped" ../out &&
	git diff --quiet HEAD && git diff --cached --quiet &&
	test -z "$(git ls-files --others --exclude-standard)" &&
	! ls .git/autokernel | grep "^tmp-" && ! test -e .git/autokernel/run.lock
'

test_expect_success 'a hook killed while it judges leaves no temporary directory' '
	cd repo && cp ../slow.c softmax/kernel.c &&
	{ git commit -q -m "killed" softmax/kernel.c >/dev/null 2>&1 & } &&
	for i in $(seq 100); do
		ls .git/autokernel | grep -q "^tmp-" && break; sleep 0.05
	done &&
	ls .git/autokernel | grep "^tmp-" &&
	# the judge named by its directory, tmp-<pid>-*: never a pattern,
	# which under prove -j2 also matched another test'"'"'s hook (stop 28)
	pid=$(ls .git/autokernel | sed -n "s/^tmp-\([0-9]*\)-.*/\1/p") &&
	test -n "$pid" && kill -TERM $pid &&
	wait;
	! ls .git/autokernel | grep "^tmp-" &&
	git checkout -q HEAD -- softmax/kernel.c
'

test_expect_success 'the temporary directories of dead processes are swept' '
	cd repo && mkdir .git/autokernel/tmp-999999-abcdef &&
	echo x >.git/autokernel/tmp-999999-abcdef/f &&
	mkdir .git/autokernel/tmp-$$-mine &&
	git autokernel log >/dev/null &&
	! test -e .git/autokernel/tmp-999999-abcdef &&
	test -d .git/autokernel/tmp-$$-mine && rmdir .git/autokernel/tmp-$$-mine
'

test_done
