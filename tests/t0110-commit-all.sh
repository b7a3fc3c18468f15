#!/bin/sh
# `git commit -a` on an autokernel branch: git hands the hook a locked
# copy of the index and rolls it back itself when the hook refuses, so a
# rejected candidate leaves nothing staged (and the hook must not say it
# does); a candidate the user had staged before stays staged, and the hook
# says how to unstage it.
. "$(dirname "$0")/lib.sh"

test_setup 'a host softmax branch' '
	new_repo repo &&
	small_problem softmax >small.json &&
	cd repo &&
	git autokernel start softmax --backend host --problem ../small.json \
		>/dev/null 2>&1 &&
	cd ..
'

test_expect_success 'commit -a of a broken candidate: rejected, reset, nothing staged' '
	cd repo && echo "this is not C;" >>softmax/kernel.c &&
	test_must_fail git commit -q -a -m "broken, -a" 2>err &&
	grep "rejected: unable to build" err &&
	! grep "still staged" err &&
	git diff --quiet HEAD -- softmax/kernel.c &&
	git diff --cached --quiet HEAD -- softmax/kernel.c &&
	git rev-parse --verify refs/autokernel/attempts/softmax/1
'

test_expect_success 'a candidate staged before commit -a stays staged, and the hook says so' '
	cd repo && echo "this is not C;" >>softmax/kernel.c &&
	git add softmax/kernel.c &&
	test_must_fail git commit -q -a -m "broken, staged, -a" 2>err &&
	grep "still staged" err &&
	! git diff --cached --quiet HEAD -- softmax/kernel.c &&
	git diff --quiet HEAD -- softmax/kernel.c
'

test_done
