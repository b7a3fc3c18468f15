#!/bin/sh
# scripts/device-round.sh MODE...: a device call's share of issue 20 (real
# model shapes), run on the GPU machine over a copy of this tree with a
# `make bundle` tarball (AK_BUNDLE, default build/'s; build it here, carry
# it).  The modes, in the order given:
#
#   check    make check-gpu's scripts in six lanes within what is left
#            of DEADLINE (default 540; about 6 minutes on an H200 in
#            session 14, before the test shapes grew); LANES, lanes
#            separated by ';', runs those instead (a part of the suite,
#            for a second call)
#   judge    the candidates of QUEUE (scripts/candidates/queue), through judge.sh
#            at the op's issue-20 shapes (real-shapes.sh --shapes: weights
#            about 1/time) in the line's dtype;
#            a branch's tip, where it kept one, into KEPT/<op>.<ext> (default
#            build/kept: ignored, so it stays for the next call on the same
#            machine); ONLY="op/dtype ..." judges those groups alone
#   tables   scripts/real-shapes.sh for OPS (default every op; JOBS, 3
#            or the number of OPS if fewer, at a time, the benchmarks
#            still one at a time; cross_entropy alone: JOBS 1; DTYPES, as
#            real-shapes.sh takes it, f16 and bf16), each op from
#            KEPT/<op>.<ext> where judge left one (else its starter), and their
#            tables (scripts/shapes-table.py); each op's result packed as
#            it ends, and with DEADLINE the rest stopped 30 s before it
#            (the nine took over 600 s on an H100: split them with OPS)
#   ncu      Nsight Compute (--clock-control none) over scripts/ncu-op.py
#            for each OP:SHAPE:DTYPE of NCU (default: the rows furthest
#            from the goal), the kernel from KEPT/<op>.cu where judge left
#            one, PyTorch's op beside it: each launch's duration,
#            throughputs, registers and occupancy in the summary, the
#            reports in the tarball; NCU_SECTIONS (ncu's section names)
#            in place of SpeedOfLight LaunchStats Occupancy
#            MemoryWorkloadAnalysis, e.g. WarpStateStats for the stalls
#
# Everything lands in one folder, packed into OUT/r.tgz (OUT: $OUT, else
# ./device-out) after each mode and each judged group, beside
# OUT/summary.txt, written as it goes and printed last: the device, check's
# table, each verdict, the tables.  So a call cut off by its time limit
# still brings back what it finished.  The device tool brings back few
# files, so everything else stays inside the tarball.  With DEADLINE (s
# from the start), judge starts no group with less time left than its
# candidates want: about 50 s and 30 a candidate (session 26, H100: a
# group of one took 70-80 s, two groups of two 170 s in all).
# BACKEND (cuda) is the backend judge and tables use: host runs them on
# the CPU, as t0027 does with a queue of host candidates, WORKLOAD (shape:
# weight ...) in place of every op's shapes (judge's and tables'), and
# AK_BUNDLE=- (the git-autokernel on PATH, no tarball).
#
#   here:   make bundle
#   device run (carry build/git-autokernel-0.1.0.tar.gz, timeout 600):
#           DEADLINE=560 sh scripts/device-round.sh judge
#           DEADLINE=560 OPS="reduce softmax layernorm rmsnorm \
#               rotary_embedding" sh scripts/device-round.sh tables
#           DEADLINE=560 OPS="flash_attention matmul fused_mlp" \
#               sh scripts/device-round.sh tables
#           DEADLINE=560 OPS=cross_entropy sh scripts/device-round.sh tables
#           DEADLINE=540 sh scripts/device-round.sh check
#
# On an H100 in session 21: judge of six candidates 428 s, check 342 s;
# tables of the first five ops under 600 s, the last four unfinished
# there.  In session 22: judge of four candidates and then tables until
# 530 s finished the first five ops (cross_entropy f16 too); the tables
# of flash_attention, matmul and fused_mlp took 530 s, with cross_entropy
# beside them unfinished (its start alone verifies 8192x128256 for 93
# s).  In session 23: judge of four candidates in three groups 282 s;
# ncu of two ops 40 s; the lanes t0610, t0630, t0640 and
# t0670@flash_attention,layernorm 190 s.  In session 24: judge of two
# candidates and then all of check in six lanes, 536 s; softmax's tables
# alone 48 s; cross_entropy's under JOBS 3 (5 threads of 16) did not
# end within 310 s, its start taking about 150.  KEPT stays only on a warm
# machine (it goes back after 30 s idle): to hand what judge kept to
# tables on a fresh one, copy kept/ from the tarball into build/kept here
# and carry that too.
set -u
cd "$(dirname "$0")/.." || exit 2
src=$PWD
out=${OUT:-$src/device-out}
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 2
bundle=${AK_BUNDLE:-$(ls build/git-autokernel-*.tar.gz 2>/dev/null | head -1)}
if test "$bundle" != -; then
	test -f "$bundle" || { echo "no bundle: make bundle here first" >&2; exit 2; }
	bundle=$(cd "$(dirname "$bundle")" && pwd)/$(basename "$bundle")
fi
kept=${KEPT:-$src/build/kept}
backend=${BACKEND:-cuda}
case $backend in
cuda) ext=cu ;; hip) ext=hip ;; host) ext=c ;; triton) ext=py ;;
*) echo "unknown backend '$backend'" >&2; exit 2 ;;
esac
mkdir -p "$kept" && kept=$(cd "$kept" && pwd) || exit 2

W=$(mktemp -d "${TMPDIR:-/tmp}/device-round.XXXXXX") || exit 2
trap 'rm -rf "$W"' EXIT
B=$(mktemp -d "${TMPDIR:-/tmp}/device-round-tool.XXXXXX") || exit 2
trap 'rm -rf "$W" "$B"' EXIT
if test "$bundle" != -; then
	tar -C "$B" -xzf "$bundle" || exit 2
	export PATH=$B/git-autokernel/bin:$PATH
fi
sum=$out/summary.txt
t0=$(date +%s)
pack () { cp "$sum" "$W/summary.txt"; tar -C "$W" -czf "$out/r.tgz" .; }
{
	echo "== $(date -u '+%F %T') $(git autokernel --version 2>&1 | head -1)"
	nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader 2>&1
} >"$sum"

check () {
	lanes=${LANES:-"t0650@matmul,softmax,layernorm,rmsnorm;t0650@cross_entropy,reduce,rotary_embedding,flash_attention,fused_mlp;t0670@softmax,layernorm,rmsnorm,cross_entropy,reduce;t0670@matmul,rotary_embedding,half,flash_attention,fused_mlp;t0640 t0610 t0660 t0630;t0620 t0400"}
	left=$((${DEADLINE:-540} - ($(date +%s) - t0)))
	echo "== check (make check-gpu in lanes, $left s): $lanes"
	(
	IFS=';'
	# shellcheck disable=SC2086
	set -- $lanes
	unset IFS
	LOGS=$W/check AK_BUNDLE=$bundle sh scripts/check-gpu-lanes.sh "$left" "$@"
	echo "   check exit $?"
	)
}

# judge: the queue's lines grouped by op and dtype, in order of first
# appearance; each group one judge.sh branch
judge () {
	q=${QUEUE:-scripts/candidates/queue}
	grep -v '^[[:space:]]*\(#\|$\)' "$q" >"$W/lines"
	awk '!seen[$1 "/" $2]++ { print $1 "/" $2 }' "$W/lines" >"$W/groups"
	n=0
	while read -r g; do
		op=${g%/*} dt=${g#*/}
		case " ${ONLY:-$g} " in *" $g "*) ;; *) continue ;; esac
		ws=${WORKLOAD:-$(sh scripts/real-shapes.sh --shapes "$op")} ||
			{ echo "== judge: unknown op $op"; continue; }
		shapes=
		for s in $ws; do shapes="$shapes $s:$dt"; done
		set --
		while read -r qop qdt spec msg; do
			test "$qop/$qdt" = "$g" || continue
			n=$((n + 1))
			f=$W/cand/$n-$(basename "${spec%%:*}" .patch).$ext
			mkdir -p "$W/cand"
			if sh scripts/candidate.sh "$spec" "$f" 2>"$W/cand/$n.err"; then
				set -- "$@" "$f=$msg"
			else
				echo "== judge: $spec not made: $(cat "$W/cand/$n.err")"
			fi
		done <"$W/lines"
		test $# -gt 0 || continue
		if test -n "${DEADLINE:-}"; then
			left=$((DEADLINE - ($(date +%s) - t0))) need=$((50 + 30 * $#))
			if test "$left" -lt "$need"; then
				echo "== judge $op $dt: not started: $# to judge want about $need s, $left left of $DEADLINE"
				continue
			fi
		fi
		echo "== judge $op $dt:$shapes"
		from=
		test -f "$kept/$op.$ext" && from="-f $kept/$op.$ext" &&
			echo "   from $kept/$op.$ext (kept earlier)"
		# shellcheck disable=SC2086
		sh scripts/judge.sh -b "$backend" -o "$W/judge-$op-$dt" -s "$shapes" $from \
			"$op" "$@" </dev/null
		best=$W/judge-$op-$dt/best.$ext
		if test -f "$best" && ! cmp -s "$best" "kernels/$backend/$op.$ext" &&
			! cmp -s "$best" "$kept/$op.$ext"; then
			cp "$best" "$kept/$op.$ext" && mkdir -p "$W/kept" &&
				cp "$best" "$W/kept/$op.$ext" &&
				echo "   kept: $kept/$op.$ext"
		fi
		pack
	done <"$W/groups"
}

# kill_tree PID: PID and everything under it, stopped first so that
# nothing new is started meanwhile (not a process group of its own: one
# in a session of its own would outlive the device's kill of the call)
kill_tree () {
	kill -s STOP "$1" 2>/dev/null
	for c in $(pgrep -P "$1"); do
		kill_tree "$c"
	done
	kill -s KILL "$1" 2>/dev/null
}

# tables: real-shapes.sh watched: each op's "done" goes into the summary
# and the tarball as it comes (JOBS 3 took over 600 s for the nine ops on
# an H100, and that call, cut off, brought back nothing of them), and with
# DEADLINE it is stopped 30 s before, the ops not done named.
tables () {
	# JOBS 3, or fewer where there are fewer ops: each op's checks get
	# cores/JOBS threads whatever runs beside them, and cross_entropy's
	# 8192x128256 wants them all (session 24: alone in its call but
	# under JOBS 3, on 5 threads of 16, its bf16 tables did not end in
	# 310 s)
	# shellcheck disable=SC2086
	set -- ${OPS:-$(sh scripts/real-shapes.sh --ops)}
	jobs=${JOBS:-$(($# < 3 ? $# : 3))}
	echo "== tables ${OPS:-every op} (JOBS $jobs)"
	ls "$kept"/*."$ext" 2>/dev/null | sed 's/^/   from /'
	mkdir -p "$W/shapes" && : >"$W/tables.log"
	BACKEND=$backend JOBS=$jobs SHAPES=${WORKLOAD:-} \
	AUTOKERNEL_TORCH_COMPILE=${AUTOKERNEL_TORCH_COMPILE:-0} KERNELS=$kept \
		sh scripts/real-shapes.sh "$W/shapes" "$@" \
		>"$W/tables.log" 2>&1 </dev/null &
	pid=$! seen=0 cut=
	while kill -0 "$pid" 2>/dev/null; do
		sleep 1
		n=$(wc -l <"$W/tables.log")
		if test "$n" -gt "$seen"; then
			sed -n "$((seen + 1)),${n}p" "$W/tables.log" | sed 's/^/   /'
			seen=$n
			pack    # an op's "done" is in the summary now (run_mode)
		fi
		if test -n "${DEADLINE:-}" &&
			test $(($(date +%s) - t0)) -ge $((DEADLINE - 30)); then
			kill_tree "$pid"
			cut=1
			break
		fi
	done
	wait "$pid" 2>/dev/null
	sed -n "$((seen + 1)),\$p" "$W/tables.log" | sed 's/^/   /'
	if test -n "$cut"; then
		left=
		for op in ${OPS:-$(sh scripts/real-shapes.sh --ops)}; do
			grep -q "^$op: done" "$W/tables.log" || left="$left $op"
		done
		echo "   cut off $((DEADLINE - 30)) s into DEADLINE $DEADLINE; not done:$left"
	fi
	python3 scripts/shapes-table.py "$W/shapes" >"$W/shapes.md" 2>&1
	cat "$W/shapes.md"
}

ncu_mode () {
	sections=
	for s in ${NCU_SECTIONS:-SpeedOfLight LaunchStats Occupancy MemoryWorkloadAnalysis}; do
		sections="$sections --section $s"
	done
	for item in ${NCU:-flash_attention:8x32x512x128:f16 matmul:1000x1000x1000:f16 \
		matmul:16x4096x4096:f16 fused_mlp:512x2048x5504:f16 layernorm:16384x4096:bf16}; do
		op=${item%%:*} rest=${item#*:}
		shape=${rest%%:*} dt=${rest#*:}
		src=
		test -f "$kept/$op.cu" && src="--src $kept/$op.cu"
		f=$W/ncu-$op-$shape-$dt.txt
		echo "== ncu $op $shape $dt${src:+ (the kept kernel)}"
		# shellcheck disable=SC2086
		ncu --clock-control none --nvtx --nvtx-include "ak_kernel/" \
			--nvtx-include "ak_torch/" $sections \
			python3 scripts/ncu-op.py "$op" "$shape" "$dt" --torch --calls 1 \
			$src >"$f" 2>&1
		echo "   ncu exit $?"
		grep -E 'Context [0-9]+, Stream|Duration|DRAM Throughput|Compute \(SM\) Throughput|L2 Cache Throughput|Registers Per Thread|Achieved Occupancy|largest difference|^==(ERROR|WARNING)' \
			"$f" | head -80
	done
}

# A mode writes straight into the summary, so that a pack (after each
# judged group, as each op's tables end) holds every line written before
# it, where through tee it could miss the last ones; tail streams them
# here meanwhile and, once the mode has ended, prints the rest and ends.
run_mode () {
	from=$(($(wc -c <"$sum") + 1))
	"$1" >>"$sum" 2>&1 </dev/null &
	mp=$!
	tail -c +"$from" --pid="$mp" -f "$sum"
	wait "$mp"
}

for mode; do
	case $mode in
	check | judge | tables) run_mode "$mode" ;;
	ncu) run_mode ncu_mode ;;
	*) echo "unknown mode '$mode' (check, judge, tables, ncu)" >&2 ;;
	esac
	pack
done
echo "== summary"
cat "$sum"
