# tests/lib.sh: TAP helpers in the manner of git's test-lib.sh.
#
#	. "$(dirname "$0")/lib.sh"
#	test_expect_success 'what it shows' '
#		git autokernel ops >out &&
#		grep softmax out
#	'
#	test_done
#
# Each script runs in a fresh trash directory with its own HOME and git
# config; the binary under test comes from $AK_BUILD (make check sets it).
set -u

TEST_DIR=$(cd "$(dirname "$0")" && pwd)
case $TEST_DIR in
*/gpu) TEST_DIR=${TEST_DIR%/gpu} ;;
esac
SRC_DIR=$(cd "$TEST_DIR/.." && pwd)
AK_BUILD=${AK_BUILD:-$SRC_DIR/build}
if test -n "${AK_INSTALLED:-}"; then
	# test the git-autokernel on PATH, as installed: its runners and
	# libraries are in ../libexec/git-autokernel beside it
	AK_LIBEXEC=$(dirname "$(command -v git-autokernel)")/../libexec/git-autokernel
else
	PATH="$AK_BUILD:$PATH"
	AK_LIBEXEC=$AK_BUILD
fi
export PATH

TRASH=$(mktemp -d "${TMPDIR:-/tmp}/ak-test.XXXXXX")
trap 'cd /; rm -rf "$TRASH"' EXIT
cd "$TRASH" || exit 1
export HOME="$TRASH/home"
mkdir -p "$HOME"
# builds are cached per user; share one cache across a test run
export AUTOKERNEL_CACHE="${AK_TEST_CACHE:-$TRASH/cache}"
export GIT_CONFIG_NOSYSTEM=1
export GIT_AUTHOR_NAME="A U Thor" GIT_AUTHOR_EMAIL=author@example.com
export GIT_COMMITTER_NAME="C O Mitter" GIT_COMMITTER_EMAIL=committer@example.com
export AUTOKERNEL_BENCH_MS=${AUTOKERNEL_BENCH_MS:-150}
# Host kernels on one thread: prove -j2 on two cores oversubscribes, and a
# parallel region then waits whole time slices for a descheduled thread.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
git config --global init.defaultBranch main
git config --global user.name "A U Thor"
git config --global user.email author@example.com
unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE

test_count=0
test_failed=0

# The honest f32 softmax and its helpers, which the cheating kernels of
# tests/kernels/cheat wrap: tests/kernels/softmax-f32.c as honest_kernel(),
# then honest.h.
honest_h () {
	sed -e 's/^int ak_kernel(/static int honest_kernel(/' -e '/BREAK/d' \
		"$TEST_DIR/kernels/softmax-f32.c"
	cat "$TEST_DIR/kernels/cheat/honest.h"
}

# A failure's output on stderr (prove shows it even without -v), and,
# when make check names one, in a log that it prints again after the
# summary, where a CI that keeps only the end of its output still shows it;
# there, also the ends of the files the test wrote beside the repositories
# (the ../err a command's stderr went to).
test_failure_log () {
	sed -e 's/^/#   /' "$TRASH/.out" | tail -n 40 >&2
	test -n "${AK_FAIL_LOG:-}" || return 0
	{
		echo "== $(basename "$0"): not ok $test_count - $1"
		tail -n 40 "$TRASH/.out"
		find "$TRASH" -maxdepth 1 -type f -newer "$TRASH/.start" \
			! -name .out ! -name .start -size -256k 2>/dev/null |
		while read -r f; do
			echo "-- ${f#$TRASH/}:"
			tail -n 15 "$f"
		done
	} >>"$AK_FAIL_LOG"
}

# Marks when a test began, for test_failure_log.
test_begin () {
	test_count=$((test_count + 1))
	: >"$TRASH/.start"
}

test_expect_success () {
	test_begin
	if (eval "$2") >"$TRASH/.out" 2>&1; then
		echo "ok $test_count - $1"
	else
		test_failed=$((test_failed + 1))
		echo "not ok $test_count - $1"
		test_failure_log "$1"
	fi
}

# Like test_expect_success, but the body runs in this shell, so what it
# sets stays set (use for set-up steps).
test_setup () {
	test_begin
	if eval "$2" >"$TRASH/.out" 2>&1; then
		echo "ok $test_count - $1"
	else
		test_failed=$((test_failed + 1))
		echo "not ok $test_count - $1"
		test_failure_log "$1"
	fi
}

test_skip () {
	test_count=$((test_count + 1))
	echo "ok $test_count # skip $1 ($2)"
}

# test_expect_code N cmd args...: the command exits with status N.
test_expect_code () {
	want=$1
	shift
	"$@"
	got=$?
	if test "$got" != "$want"; then
		echo "expected exit $want, got $got: $*" >&2
		return 1
	fi
	return 0
}

test_must_fail () {
	if "$@"; then
		echo "expected failure: $*" >&2
		return 1
	fi
	return 0
}

# The interpreter that imports torch, as the tool finds it (lib/python.h),
# into $TORCH_PY; without one the script is skipped as a whole, saying why.
need_torch () {
	TORCH_PY=$(git autokernel e2e --which-python 2>"$TRASH/.torch") || {
		echo "1..0 # SKIP no interpreter imports torch:" \
			"$(cat "$TRASH/.torch")"
		exit 0
	}
}

# A repository with one commit and the hooks installed.
new_repo () {
	git init -q "$1" &&
	(cd "$1" && echo "# kernels" >README.md && git add README.md &&
	 git commit -q -m initial)
}

# A problem.json for op on the host backend, with small shapes so a full
# verification takes a fraction of a second.
small_problem () {
	op=$1
	case $op in
	softmax|rmsnorm|layernorm|reduce|cross_entropy)
		smoke=4x32 tests='"16x256", "7x1000"' edges='"1x1", "3x7"'
		bench=64x4096 ;;
	matmul)
		smoke=8x8x8 tests='"32x48x64"' edges='"1x1x1", "7x5x3"'
		bench=128x128x128 ;;
	rotary_embedding)
		smoke=1x1x4x8 tests='"1x2x16x32"' edges='"1x1x1x2", "1x1x3x6"'
		bench=1x4x64x64 ;;
	flash_attention)
		smoke=1x1x4x8 tests='"1x2x33x16"' edges='"1x1x1x8", "1x1x5x4"'
		bench=1x2x64x32 ;;
	fused_mlp)
		smoke=2x8x16 tests='"8x32x48"' edges='"1x1x1", "3x5x7"'
		bench=16x64x128 ;;
	esac
	cat <<JSON
{
  "version": 1, "op": "$op", "backend": "host", "kernel": "kernel.c",
  "dtypes": ["f16", "bf16", "f32"], "bench_shape": "$bench",
  "smoke_shape": "$smoke", "test_shapes": [$tests],
  "edge_shapes": [$edges], "seed": 7
}
JSON
}

# cuda_problem OP: small_problem for the CUDA backend.
cuda_problem () {
	small_problem "$1" | sed -e 's/"backend": "host"/"backend": "cuda"/' \
		-e 's/"kernel.c"/"kernel.cu"/'
}

# triton_problem OP: small_problem for the triton backend.
triton_problem () {
	small_problem "$1" | sed -e 's/"backend": "host"/"backend": "triton"/' \
		-e 's/"kernel.c"/"kernel.py"/'
}

test_done () {
	echo "1..$test_count"
	if test "$test_failed" -gt 0; then
		echo "# failed $test_failed of $test_count"
		exit 1
	fi
	exit 0
}
