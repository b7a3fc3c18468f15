#!/bin/bash
# check-gpu-lanes.sh DEADLINE_S "LANE" ...: make check-gpu's scripts in
# parallel lanes, for a GPU lent for minutes (the whole suite takes about
# 25 minutes one script after another, about 6 in six lanes).
#
#   scripts/check-gpu-lanes.sh 400 \
#	"t0650@matmul,softmax,layernorm,rmsnorm" \
#	"t0650@cross_entropy,reduce,rotary_embedding,flash_attention,fused_mlp" \
#	"t0670@softmax,layernorm,rmsnorm,cross_entropy,reduce" \
#	"t0670@matmul,rotary_embedding,half,flash_attention,fused_mlp" \
#	"t0640 t0610 t0660 t0630" "t0620 t0400"
#
# A lane's items run one after another, the lanes at once.  An item is
# tests/gpu/tNNNN-*.sh named by its number, or tNNNN@a,b: t0670 with
# AK_TORCH_OPS, t0650 with AK_TRITON_STARTERS set to a and b.  The tool
# under test is a `make bundle` tarball (AK_BUNDLE, default build/'s),
# unpacked under /tmp.  The lanes share one test cache, so the device lock
# keeps their benchmarks apart; what profiles without the lock (t0400's
# two runs of one model, compared within 2 points) can be disturbed by the
# other lanes' kernels.  TAP logs in LOGS (/tmp/check-gpu-logs), a table
# of them at the end; exit status 1 if any test failed or ran out of time.
set -u
deadline=${1:?usage: check-gpu-lanes.sh DEADLINE_S LANE...}
shift
cd "$(dirname "$0")/.." || exit 2
bundle=${AK_BUNDLE:-$(ls build/git-autokernel-*.tar.gz 2>/dev/null | head -1)}
test -f "$bundle" || { echo "no bundle: make bundle first" >&2; exit 2; }
root=$(mktemp -d /tmp/check-gpu-XXXXXX) || exit 2
tar -C "$root" -xzf "$bundle" || exit 2
B=$root/git-autokernel
export PATH=$B/bin:$PATH AK_INSTALLED=1 AK_BUILD=$B/bin \
	AK_TEST_CACHE=$root/cache
logs=${LOGS:-/tmp/check-gpu-logs}
mkdir -p "$logs"
t0=$(date +%s)

lane () {
	for item in $1; do
		t=${item%%@*} ops=
		test "$item" = "$t" || ops=$(echo "${item#*@}" | tr , ' ')
		f=$(ls tests/gpu/"$t"-*.sh 2>/dev/null | head -1)
		log=$logs/$(echo "$item" | tr '@,' '__').tap
		left=$((deadline - ($(date +%s) - t0)))
		if test -z "$f"; then
			echo "not ok - no script $t" >"$log"; continue
		fi
		if test "$left" -le 5; then
			echo "not ok - $item: no time left" >"$log"; continue
		fi
		s=$(date +%s)
		AK_TORCH_OPS=$(test "$t" = t0670 && echo "$ops") \
		AK_TRITON_STARTERS=$(test "$t" = t0650 && echo "$ops") \
			timeout "$left" sh "$f" >"$log" 2>&1
		rc=$?
		test $rc = 124 && echo "not ok - $item: out of time" >>"$log"
		echo "# rc=$rc $(($(date +%s) - s)) s" >>"$log"
	done
}

for l in "$@"; do lane "$l" & done
wait
fail=0
for f in "$logs"/*.tap; do
	printf "%-50s ok %3d  not ok %3d  %s\n" "${f##*/}" \
		"$(grep -c '^ok' "$f")" "$(grep -c '^not ok' "$f")" "$(tail -1 "$f")"
	grep -q "^not ok" "$f" && fail=1
done
grep -h "^not ok" "$logs"/*.tap
rm -rf "$root"
exit $fail
