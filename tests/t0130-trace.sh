#!/bin/sh
# AUTOKERNEL_TRACE: where a judgement's time goes, from the tool and its
# runner.  It also shows the cases (inputs and fp64 references) being
# made while the kernel compiles, which is what keeps an experiment short.
. "$(dirname "$0")/lib.sh"

test_setup 'a host softmax branch and a compiler that takes a second' '
	new_repo repo &&
	small_problem softmax >small.json &&
	cd repo &&
	git autokernel start softmax --backend host --problem ../small.json \
		>/dev/null 2>&1 &&
	cd .. &&
	printf "#!/bin/sh\nsleep 1\nexec cc \"\$@\"\n" >slowcc &&
	chmod +x slowcc
'

test_expect_success 'a traced experiment says where its time went' '
	sed -i "s/^#define CHUNK 1024 /#define CHUNK 2048 /" repo/softmax/kernel.c &&
	(cd repo && AUTOKERNEL_TRACE="$TRASH/trace" AUTOKERNEL_CC="$TRASH/slowcc" \
		git commit -q -a -m "bigger chunks" >../out 2>&1 || :) &&
	grep "judged in" out &&
	for what in "hook: pre-commit starts" "judge: softmax: judging starts" \
		"judge: .*kernel.c: built in" "cases: 16x256 f16 normal: made in" \
		"runner: load: dlopen" "runner: call: inputs .* kernel .* checks" \
		"verify: 7x1000 f32: call answered" "runner: bench: set up" \
		"bench: .* calls checked in" "hook: pre-commit ends" \
		"hook: commit-msg ends"
	do
		grep "^[0-9][0-9.]* [0-9]* $what" trace || { echo "missing: $what"; exit 1; }
	done
'

test_expect_success 'every case is made while the kernel compiles' '
	built=$(grep -n "kernel.c: built in" trace | head -1 | cut -d: -f1) &&
	made=$(grep -n "cases: .* made in" trace | tail -1 | cut -d: -f1) &&
	test "$made" -lt "$built" &&
	test $(grep -c "cases: .* made in" trace) -ge 10
'

test_expect_success 'without AUTOKERNEL_TRACE nothing is written' '
	sed -i "s/^#define UNROLL 4 /#define UNROLL 8 /" repo/softmax/kernel.c &&
	(cd repo && git commit -q -a -m "more unrolling" >../out2 2>&1 || :) &&
	grep "judged in" out2 &&
	test $(grep -c "hook: pre-commit starts" trace) = 1
'

# A /dev/shm too small for the tensors (64 MB in a default Docker
# container) is found when the mapping is sized, not by a SIGBUS.
if unshare -m true 2>/dev/null; then
	test_expect_success 'a full /dev/shm: the tensors go to $TMPDIR' '
		(cd repo && unshare -m sh -c "mount -t tmpfs -o size=16k tmpfs /dev/shm &&
			git autokernel verify softmax" >../out 2>&1) &&
		grep "no room for .* of tensors in /dev/shm" out &&
		grep "pass 5/5" out
	'
else
	test_skip 'a full /dev/shm: the tensors go to $TMPDIR' \
		'no private mount namespace here'
fi

test_done
