#!/bin/sh
# The HIP backend where no AMD GPU is: the runner builds, kernels build
# for the configured arch and are cached, a compile error is hipcc's, and
# every command that needs the device says that there is none (exit 3).
# The starters' builds are t0022's.
. "$(dirname "$0")/lib.sh"

if ! command -v hipcc >/dev/null; then
	test_skip "the HIP backend" "hipcc not found"
	test_done
fi

# A private cache: the first build below must really build.
export AUTOKERNEL_CACHE="$TRASH/hip-cache"

hip_problem () {
	small_problem "$1" | sed -e 's/"backend": "host"/"backend": "hip"/' \
		-e 's/"kernel.c"/"kernel.hip"/'
}

test_expect_success 'the HIP runner is built' '
	test -x "$AK_BUILD/ak-runner-hip"
'

test_setup 'a kernel directory with the naive reduce' '
	mkdir -p k/reduce &&
	hip_problem reduce >k/reduce/problem.json &&
	cp "$SRC_DIR/kernels/hip/naive/reduce.hip" k/reduce/kernel.hip
'

test_expect_success 'it builds for gfx90a, then comes from the cache' '
	git autokernel verify --build-only k/reduce >first &&
	grep "^built reduce/kernel.hip (k/reduce) for hip: .*\.so$" first &&
	git autokernel verify --build-only k/reduce >second &&
	grep "(cached)$" second &&
	test "$(sed "s/ (cached)//" second)" = "$(cat first)"
'

# arch_home ARCH: a HOME whose git config sets autokernel.hip.arch.
arch_home () {
	mkdir -p "$TRASH/home-$1" &&
	HOME="$TRASH/home-$1" git config --global autokernel.hip.arch "$1" &&
	echo "$TRASH/home-$1"
}

test_expect_success 'autokernel.hip.arch picks the target' '
	h=$(arch_home gfx908) &&
	HOME=$h git autokernel verify --build-only k/reduce >gfx908 &&
	! grep "(cached)" gfx908 &&
	test "$(cat gfx908)" != "$(cat first)" &&
	h=$(arch_home gfx999) &&
	(HOME=$h && export HOME &&
	 test_expect_code 1 git autokernel verify --build-only k/reduce) 2>err &&
	grep "gfx999" err
'

test_setup 'a kernel that does not compile' '
	mkdir -p k/broken &&
	hip_problem reduce >k/broken/problem.json &&
	sed "s/return run<float>(a);/return run<float>(a) + undeclared_thing;/" \
		"$SRC_DIR/kernels/hip/naive/reduce.hip" >k/broken/kernel.hip
'

test_expect_success 'a compile error is hipcc'"'"'s, exit 1' '
	test_expect_code 1 git autokernel verify --build-only k/broken 2>err &&
	grep "unable to build '"'"'broken/kernel.hip'"'"': hipcc exited with 1" err &&
	grep "undeclared_thing" err &&
	grep "error:" err
'

test_expect_success 'no hipcc is a missing toolchain, exit 3' '
	(AUTOKERNEL_HIPCC=/nonexistent/hipcc && export AUTOKERNEL_HIPCC &&
	 test_expect_code 3 git autokernel verify --build-only k/reduce) 2>err &&
	grep "hip toolchain missing" err
'

if test -e /dev/kfd; then
	test_skip "verify and start without an AMD GPU" "/dev/kfd exists"
	test_done
fi

test_expect_success 'verify with no AMD GPU: exit 3, no hip device' '
	test_expect_code 3 git autokernel verify k/reduce 2>err &&
	grep "^error: no hip device: " err
'

test_expect_success 'bench with no AMD GPU: exit 3' '
	test_expect_code 3 git autokernel bench k/reduce 2>err &&
	grep "^error: no hip device: " err
'

test_setup 'a repository' '
	new_repo repo
'

test_expect_success 'start --backend hip with no AMD GPU: exit 3, no branch' '
	(cd repo &&
	 test_expect_code 3 git autokernel start softmax --backend hip 2>../err &&
	 test_must_fail git rev-parse -q --verify autokernel/softmax &&
	 test ! -e softmax &&
	 test "$(git symbolic-ref --short HEAD)" = main) &&
	grep "^error: no hip device: " err
'

test_done
