#!/bin/sh
# ops lists the nine ops with their contracts; bad names are usage errors.
. "$(dirname "$0")/lib.sh"

test_expect_success 'ops lists the nine ops' '
	git autokernel ops >out &&
	for op in matmul softmax layernorm rmsnorm cross_entropy reduce \
		  rotary_embedding flash_attention fused_mlp; do
		grep "^$op " out || return 1
	done
'

test_expect_success 'ops OP shows tensors, shapes and tolerances' '
	git autokernel ops cross_entropy >out &&
	grep "target\[N\]" out && grep "4096x32000" out && grep "tolerance" out
'

test_expect_success 'ops --json is JSON with every op' '
	git autokernel ops --json >out.json &&
	python3 -c "import json; o=json.load(open(\"out.json\")); \
		assert len(o) == 9 and all(\"tolerances\" in x for x in o)"
'

test_expect_success 'ops --problem writes a problem.json that start accepts' '
	git autokernel ops softmax --problem --backend cuda >p.json &&
	grep "\"bench_shape\": \"4096x4096\"" p.json &&
	git autokernel ops softmax --problem >h.json &&
	grep "\"backend\": \"host\"" h.json
'

test_expect_success 'rotary_embedding has two layouts, kept in scalar[0]' '
	git autokernel ops rotary_embedding >out &&
	grep "layouts:  interleaved (0), half (1)" out &&
	git autokernel ops rotary_embedding --problem >rot.json &&
	grep "\"layout\": \"interleaved\"" rot.json &&
	git autokernel ops softmax --problem >sm.json &&
	! grep layout sm.json
'

test_expect_success 'an unknown op is a usage error' '
	test_expect_code 2 git autokernel ops nosuchop
'

test_expect_success 'an unknown command is a usage error' '
	test_expect_code 2 git autokernel frobnicate 2>err &&
	grep "not a git autokernel command" err
'

test_expect_success 'every command answers -h' '
	for c in init start verify bench run log report bisect profile ops demo; do
		git autokernel $c -h >out 2>&1 && grep -i usage out || return 1
	done
'

test_expect_success 'git autokernel works as a git subcommand' '
	git autokernel --version | grep "^git-autokernel "
'

# make rebuilds what writes the version when HEAD moves, so a build from
# a checkout names the commit it was built at, not an earlier one
test_expect_success 'a build from a checkout names its HEAD' '
	if test -n "${AK_INSTALLED:-}" ||
	   ! rev=$(git -C "$SRC_DIR" rev-parse --short HEAD 2>/dev/null); then
		echo "# not a build from a git checkout: nothing to compare"
		return 0
	fi
	git autokernel --version >out &&
	grep "^git-autokernel $(cat "$SRC_DIR/VERSION")-$rev " out
'

test_done
