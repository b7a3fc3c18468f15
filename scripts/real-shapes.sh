#!/bin/sh
# scripts/real-shapes.sh OUTDIR [OP...]: issue 20's shapes through the
# tool on a GPU.  Each op's CUDA starter is started in a scratch
# repository with the list below as its workload (equal weights), then
# `bench --torch --json` times it beside PyTorch (eager, and
# torch.compile where it works) and the same-size copy at every shape, in
# f16 and bf16: OUTDIR/<op>-<dtype>.json, with each start's output and
# bench's stderr beside them.  scripts/shapes-table.py OUTDIR makes the
# tables of doc/results/h200/shapes.md from them.
#
#   PATH=/tmp/git-autokernel/bin:$PATH scripts/real-shapes.sh $OUT/shapes
#
# scripts/real-shapes.sh --shapes OP prints OP's list as SHAPE:WEIGHT, the
# weights those that scripts/device-round.sh judges candidates with;
# --ops the ops run when none is named.
#
# SHAPES (SHAPE:WEIGHT ...), where set, is every op's list instead (a
# test's small shapes); DTYPES (f16 bf16) the dtypes benched, in that
# order (one alone finishes a table a cut-off run left half done);
# AUTOKERNEL_BENCH_MS (default 300 here) is each benchmark's budget;
# BACKEND (cuda) the backend; KERNELS a folder whose <op>.<ext> (a
# candidate, judge.sh's best.<ext>) an op starts from instead of the
# tool's starter; JOBS (1) how many ops at once: their builds and
# stages overlap, and their benchmarks take the device in
# turn (the device lock in the user's cache), so the figures are those
# of a device timed alone.  A benchmark holds the device while the
# parent checks each timed call on the host, on cores/JOBS threads; where
# a checked row reads a whole input (cross_entropy's one loss,
# fused_mlp's weights) that is most of the time (8192x128256
# cross_entropy on 5 threads of 16: 18 calls in 89 s), so there JOBS 1
# is the faster.
set -u
# Issue 20's shapes of an op, each with a weight of about 1/(its time on
# an H200 in doc/results/h200/shapes.md), so that in a judgement each
# counts by its relative change where equal weights would let the longest
# decide.  The tables here start each op with equal weights, as the issue
# says: a weight changes no timing.
shapes () {
	case $1 in
	reduce) echo 1x16777216:15 8192x8192:7 4096x128256:1 ;;
	softmax) echo 1x32000:26 32x50257:19 16x128256:18 8192x1024:16 4096x4096:10 ;;
	layernorm) echo 8192x768:7 4096x2048:6 16384x4096:1 ;;
	rmsnorm) echo 1x4096:33 8192x4096:4 32768x5120:1 ;;
	rotary_embedding) echo 8x8x2048x64:5 2x32x1024x128:5 1x32x4096x128:3 ;;
	cross_entropy) echo 1024x50257:13 4096x32000:6 8192x128256:1 ;;
	flash_attention) echo 2x32x1024x64:26 4x16x2048x64:9 8x32x512x128:10 \
		1x32x4096x128:4 ;;
	matmul) echo 16x4096x4096:72 1000x1000x1000:150 2048x2048x2048:51 \
		4096x4096x4096:8 8192x8192x8192:1 ;;
	fused_mlp) echo 512x2048x5504:25 2048x2048x5504:9 4096x4096x14336:1 ;;
	*) return 1 ;;
	esac
}

# the ops, in the order they are run when none is named
OPS_ALL="reduce softmax layernorm rmsnorm rotary_embedding cross_entropy
flash_attention matmul fused_mlp"

if test "${1:-}" = --shapes; then
	shapes "${2:-}" || { echo "unknown op '${2:-}'" >&2; exit 2; }
	exit 0
fi
if test "${1:-}" = --ops; then
	echo $OPS_ALL
	exit 0
fi
out=${1:?usage: scripts/real-shapes.sh OUTDIR [OP...]}
shift
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 2
test -z "${KERNELS:-}" || KERNELS=$(cd "$KERNELS" && pwd) || exit 2
export KERNELS
export AUTOKERNEL_BENCH_MS=${AUTOKERNEL_BENCH_MS:-300}
backend=${BACKEND:-cuda}
jobs=${JOBS:-1}
dtypes=${DTYPES:-f16 bf16}
for dt in $dtypes; do
	case $dt in
	f16 | bf16 | f32) ;;
	*) echo "DTYPES: unknown dtype '$dt' (f16, bf16, f32)" >&2; exit 2 ;;
	esac
done

# run_op OP: OP's starter in a scratch repository of its own, timed
run_op () {
	op=$1
	list=${SHAPES:-$(shapes "$op")}
	repo=$(mktemp -d "${TMPDIR:-/tmp}/real-shapes-$op-XXXXXX") || return 3
	(
	cd "$repo" && git init -q && git commit -q --allow-empty -m init ||
		exit 3
	args=
	for s in $list; do args="$args --shape ${s%%:*}:1"; done
	from=$(ls "${KERNELS:-/nonexistent}/$op".* 2>/dev/null | head -1)
	test -n "$from" && args="$args --from $from"
	# shellcheck disable=SC2086
	if ! git autokernel start "$op" --backend "$backend" $args \
		>"$out/$op-start.log" 2>&1; then
		echo "$op: start failed (see $op-start.log)"
		exit 1
	fi
	for dt in $dtypes; do
		git autokernel bench --torch --json --dtype "$dt" \
			>"$out/$op-$dt.json" 2>"$out/$op-$dt.err" ||
			echo "$op $dt: bench failed (see $op-$dt.err)"
	done
	echo "$op: done"
	)
	rm -rf "$repo"
}

# shellcheck disable=SC2086
test $# -gt 0 || set -- $OPS_ALL
for op; do
	shapes "$op" >/dev/null || { echo "unknown op '$op'" >&2; exit 2; }
done
# JOBS at a time (the next starts as soon as one ends): their builds
# and stages overlap, their benchmarks take the device in turn (the
# device lock in the user's cache).  They share the cores as run
# --workers shares them: cores/JOBS threads for each judge's checks,
# asleep while they wait.
if test "$jobs" -gt 1; then
	cores=$(nproc 2>/dev/null || echo 1)
	share=$((cores / jobs))
	test "$share" -gt 0 || share=1
	export AUTOKERNEL_THREADS=${AUTOKERNEL_THREADS:-$share}
	export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
fi
# One op alone (how the line below runs each): its own process, so that
# JOBS slots stay full whatever each op takes.
if test -n "${REAL_SHAPES_ONE:-}"; then
	run_op "$1"
	exit
fi
printf '%s\n' "$@" |
	REAL_SHAPES_ONE=1 xargs -P "$jobs" -I{} sh "$0" "$out" {}
