#!/bin/sh
# bisect finds the commit that made the kernel slower, skips a commit that
# does not build, and leaves the repository as it found it: after success,
# after Ctrl-C, and when it refuses to start.
. "$(dirname "$0")/lib.sh"

# One thread: on a loaded machine OpenMP's barriers make host timings
# noisier than the slowdowns these tests plant.
export OMP_NUM_THREADS=1
K=softmax/kernel.c

# commit_unverified MESSAGE: commits the kernel as it is, hooks skipped
commit_unverified () {
	git commit -q --no-verify -am "$1"
}

comment () {
	echo "/* $1 */" >>$K &&
	commit_unverified "$1"
}

# The kernel, 50 times over: the same output, 50x the time.
make_slow () {
	sed -i "s/^int ak_kernel(/static int ak_kernel_once(/" $K &&
	cat >>$K <<-\EOF
	int ak_kernel(const struct ak_args *a)
	{
		int rc = 0;

		for (int rep = 0; rep < 50 && !rc; rep++)
			rc = ak_kernel_once(a);
		return rc;
	}
	EOF
}

test_setup 'a history with a slowdown planted among harmless commits' '
	new_repo repo &&
	small_problem softmax | sed -e "s/\"64x4096\"/\"16x1024\"/" \
		>small.json &&
	cd repo &&
	git autokernel start softmax --backend host \
		--problem ../small.json >/dev/null 2>&1 &&
	good=$(git rev-parse HEAD) &&
	comment "c1: a comment" &&
	harmless=$(git rev-parse HEAD) &&
	comment "c2: a comment" &&
	echo "this is not C;" >>$K &&
	commit_unverified "c3: does not build" &&
	broken=$(git rev-parse HEAD) &&
	sed -i "\$d" $K &&
	comment "c4: builds again" &&
	make_slow &&
	commit_unverified "c5: fifty times over" &&
	slow=$(git rev-parse HEAD) &&
	comment "c6: a comment" &&
	head=$(git rev-parse HEAD)
'

test_expect_success 'bisect finds the slow commit, skipping the broken one' '
	git autokernel bisect $good HEAD --threshold 100% >out 2>err &&
	head -n 1 out >first &&
	echo "$slow is the first slow commit" >expect &&
	cmp expect first &&
	grep "c5: fifty times over" out &&
	grep -E "^[0-9.]+x the time of" out &&
	grep "^\[$broken\]" err &&
	grep "^\[$slow\]" err
'

test_expect_success 'bisect leaves HEAD, the branch and the tree as found' '
	test "$(git rev-parse HEAD)" = "$head" &&
	test "$(git symbolic-ref HEAD)" = refs/heads/autokernel/softmax &&
	git diff --quiet HEAD &&
	! test -f .git/BISECT_LOG &&
	test_must_fail git bisect log
'

test_expect_success 'bisect --json names the commit and its slowdown' '
	git autokernel bisect --json $harmless $slow --threshold 100% \
		>out.json 2>err &&
	python3 -c "import json,sys; r=json.load(open(\"out.json\")); \
		assert r[\"first_slow\"] == sys.argv[1], r; \
		assert r[\"ratio\"] > 2, r" $slow
'

test_expect_success 'bisect exits 1 when <bad> is not slower' '
	test_expect_code 1 git autokernel bisect $good $harmless \
		--threshold 100% 2>err &&
	grep "is not slower" err &&
	! test -f .git/BISECT_LOG
'

test_expect_success 'Ctrl-C during bisect leaves no bisect behind' '
	git-autokernel bisect $good HEAD --threshold 100% >out 2>err &
	pid=$! &&
	i=0 &&
	while ! test -f .git/BISECT_LOG && test $i -lt 300
	do
		sleep 0.1 && i=$((i + 1))
	done &&
	test -f .git/BISECT_LOG &&
	sleep 0.3 &&
	kill -INT $pid &&
	test_expect_code 130 wait $pid &&
	grep "interrupted" err &&
	! test -f .git/BISECT_LOG &&
	test_must_fail git bisect log &&
	test "$(git rev-parse HEAD)" = "$head" &&
	test "$(git symbolic-ref HEAD)" = refs/heads/autokernel/softmax &&
	git diff --quiet HEAD
'

test_expect_success 'bisect refuses a work tree with changes' '
	echo "/* an edit */" >>$K &&
	test_expect_code 3 git autokernel bisect $good HEAD 2>err &&
	grep "changes to tracked files" err &&
	! test -f .git/BISECT_LOG &&
	git checkout -- $K
'

test_expect_success 'bisect refuses while another bisect is in progress' '
	git bisect start HEAD $good >/dev/null 2>&1 &&
	test_expect_code 3 git autokernel bisect $good HEAD 2>err &&
	grep "already in progress" err &&
	git bisect reset >/dev/null 2>&1
'

test_expect_success 'bisect rejects a bad range and a bad threshold' '
	test_expect_code 2 git autokernel bisect HEAD $good 2>err &&
	grep "not an ancestor" err &&
	test_expect_code 2 git autokernel bisect $good HEAD \
		--threshold fast 2>err &&
	grep "bad threshold" err &&
	test_expect_code 2 git autokernel bisect no-such-rev HEAD 2>err &&
	grep "not a commit" err
'

test_done
