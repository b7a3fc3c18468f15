#!/bin/sh
# make bench: how long the harness takes.  Per op on the host: the wall
# time of a full five-stage verify and of a benchmark of the starter.  On
# every GPU backend that answers: one experiment of softmax as the loop
# makes it (a changed kernel committed: build, five stages, interleaved
# A/B benchmark against HEAD and the baseline, decision, records).
# Then the tuner's throughput on softmax, on the host and on every GPU
# backend that answers: experiments an hour run alone and with --workers.
# A benchmark of the harness: it prints numbers and never fails on speed.
# AK_BENCH_OPS=none skips the host table; AK_BENCH_BACKENDS ("cuda hip
# triton") picks the GPU backends; AK_BENCH_WORKERS ("alone 1 4", or none
# for no tuner runs) and AK_BENCH_EXPERIMENTS (24) shape the throughput
# runs, AK_BENCH_NO_HOST_TUNER=1 skips the host's, AK_BENCH_OUT=DIR keeps
# their logs and traces; AK_BENCH_CONFIG ("key=value ...") is git config
# for every run (autokernel.sandbox=false times an experiment without the
# cell); AK_BENCH_ONE=0 skips the one-experiment timings.
set -u
AK_BUILD=${AK_BUILD:-$(cd "$(dirname "$0")/.." && pwd)/build}
SRC=$(cd "$(dirname "$0")/.." && pwd)
PATH="$AK_BUILD:$PATH"
W=$(mktemp -d "${TMPDIR:-/tmp}/ak-bench.XXXXXX")
trap 'rm -rf "$W"' EXIT
export AUTOKERNEL_CACHE="$W/cache" HOME="$W"
export GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@localhost
export GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@localhost
for kv in ${AK_BENCH_CONFIG:-}; do
	git config --global "${kv%%=*}" "${kv#*=}" || exit 2
done

secs () {
	start=$(date +%s%N)
	"$@" >"$W/last.out" 2>&1
	rc=$?
	end=$(date +%s%N)
	awk "BEGIN { printf \"%.2f\", ($end - $start) / 1e9 }"
	return $rc
}

table="$W/table"
: >"$table"
for op in ${AK_BENCH_OPS:-matmul softmax layernorm rmsnorm cross_entropy \
	  reduce rotary_embedding flash_attention fused_mlp}; do
	test "$op" = none && continue
	mkdir -p "$W/host/$op"
	git-autokernel ops "$op" --problem >"$W/host/$op/problem.json"
	cp "$SRC/kernels/host/$op.c" "$W/host/$op/kernel.c" || continue
	git-autokernel verify --build-only "$W/host/$op" >/dev/null 2>&1
	v=$(secs git-autokernel verify "$W/host/$op") || v="$v (fail)"
	b=$(secs git-autokernel bench "$W/host/$op") || b="$b (fail)"
	t=$(grep -E "^  .*[0-9] us" "$W/last.out" | head -1 | awk '{print $2, $3}')
	printf "host   %-17s verify %6.2f s   bench %6.2f s   kernel %s\n" \
		"$op" "$v" "$b" "$t" | tee -a "$table"
done

# triton: the Python runner, wherever an interpreter imports torch and
# triton and sees a CUDA device
for backend in ${AK_BENCH_BACKENDS:-cuda hip triton}; do
	test "$backend" = triton || test -x "$AK_BUILD/ak-runner-$backend" ||
		test -x "$AK_BUILD/../libexec/git-autokernel/ak-runner-$backend" ||
		continue
	repo="$W/repo-$backend"
	git init -q "$repo" && cd "$repo" &&
		git commit -q --allow-empty -m init || exit 1
	# AK_BENCH_ONE=0: the throughput runs alone
	test "${AK_BENCH_ONE:-1}" = 0 && { cd "$SRC" || exit 1; continue; }
	if ! s=$(secs git-autokernel start softmax --backend "$backend"); then
		printf "%-6s no device, or start failed: %s\n" "$backend" \
			"$(grep -m1 error "$W/last.out")" | tee -a "$table"
		cd "$SRC" || exit 1
		continue
	fi
	# an agent's edit: another block size, so a new build (for Triton,
	# a new JIT compile at every shape)
	sed -i -e 's/^#define BLOCK 256 /#define BLOCK 512 /' \
		-e 's/^BLOCK = 4096 /BLOCK = 2048 /' softmax/kernel.*
	git add softmax
	e=$(secs git commit -q -m "bench: one experiment, another block size")
	printf "%-6s softmax start (ceilings, build, verify, bench) %6.2f s\n" \
		"$backend" "$s" | tee -a "$table"
	printf "%-6s softmax one experiment (build, 5 stages, A/B) %6.2f s\n" \
		"$backend" "$e" | tee -a "$table"
	grep -E "build |smoke|sweep|stability|determinism|edge|bench |judged|verdict|error" "$W/last.out" | sed 's/^/      /'
	# the same with a workload of four shapes (a model's prefill and
	# decode, two vocabularies)
	git checkout -q main 2>/dev/null || git checkout -q master
	if s=$(secs git-autokernel start softmax --name sm4 --backend "$backend" \
		--shape 4096x4096:0.4 --shape 32x50257:0.3 \
		--shape 8192x1024:0.2 --shape 1x32000:0.1); then
		# a block size not built before: the build is timed too
		sed -i -e 's/^#define BLOCK 256 /#define BLOCK 1024 /' \
			-e 's/^BLOCK = 4096 /BLOCK = 8192 /' sm4/kernel.*
		git add sm4
		e=$(secs git commit -q -m "bench: four shapes, another block size")
		printf "%-5s softmax one experiment, 4 shapes          %6.2f s\n" \
			"$backend" "$e" | tee -a "$table"
		grep -E "bench |judged|verdict|error" "$W/last.out" | sed 's/^/      /'
	else
		echo "$backend: the four-shape start failed:"; tail -20 "$W/last.out"
	fi
	cd "$SRC" || exit 1
done
# throughput BACKEND EXT [PROBLEM]: the tuner on softmax, alone and with
# workers, each run on a branch of its own with a cold build cache.  A
# tunable the kernel ignores (SALT) gives the tuner enough kernels that
# differ; the figure is experiments an hour of wall time.
throughput () {
	b=$1 ext=$2 problem=${3:-}
	test "${AK_BENCH_WORKERS:-}" = none && return 0
	awk '{ print } !done && /autokernel: tune/ { done = 1
		print "#define SALT 0  /* autokernel: tune 0,1,2,3,4,5,6,7 */" }' \
		"$SRC/kernels/$b/softmax.$ext" >"$W/salted.$ext"
	repo="$W/tput-$b"
	git init -q "$repo" && cd "$repo" && git commit -q --allow-empty -m init &&
		base=$(git symbolic-ref --short HEAD) || return 1
	for w in ${AK_BENCH_WORKERS:-alone 1 4}; do
		export AUTOKERNEL_CACHE="$W/cache-$b-$w"
		git checkout -q "$base" &&
		git-autokernel start softmax --name "sm-$w" --backend "$b" \
			--from "$W/salted.$ext" $problem >"$W/last.out" 2>&1 || {
			printf "%-5s tuner: start failed: %s\n" "$b" \
				"$(grep -m1 error "$W/last.out")" | tee -a "$table"
			continue
		}
		opts="--max-experiments ${AK_BENCH_EXPERIMENTS:-24} --plateau 1000"
		# a kept commit at 95% of the floor would end the run
		git config autokernel.stopAtFloor 0
		test "$w" = alone || opts="$opts --workers $w"
		# with AK_BENCH_OUT, each run's trace (lib/trace.h) beside its log
		if test -n "${AK_BENCH_OUT:-}"; then
			s=$(AUTOKERNEL_TRACE="$AK_BENCH_OUT/trace-$b-$w" \
				secs git-autokernel run $opts)
		else
			s=$(secs git-autokernel run $opts)
		fi
		if test -n "${AK_BENCH_OUT:-}"; then    # the runs' logs, kept
			cp "$W/last.out" "$AK_BENCH_OUT/run-$b-$w.out"
			ls .git/autokernel "$AUTOKERNEL_CACHE" \
				>>"$AK_BENCH_OUT/files-$b.txt" 2>&1
			cat "$AUTOKERNEL_CACHE"/hello-*.json \
				>>"$AK_BENCH_OUT/files-$b.txt" 2>&1
		fi
		n=$(git-autokernel log --attempts --json | grep -c '"commit"')
		n=$((n - 1))
		printf "%-5s softmax tuner %-9s %3d experiments in %7.2f s: %5.0f an hour\n" \
			"$b" "$(test "$w" = alone && echo alone || echo "$w worker$(test "$w" = 1 || echo s)")" \
			"$n" "$s" "$(awk "BEGIN { print $n * 3600 / $s }")" | tee -a "$table"
	done
	cd "$SRC" || exit 1
}

if test -z "${AK_BENCH_NO_HOST_TUNER:-}"; then
	cat >"$W/small.json" <<-EOF
	{ "version": 1, "op": "softmax", "backend": "host", "kernel": "kernel.c",
	  "dtypes": ["f32"], "bench_shape": "64x4096", "smoke_shape": "4x32",
	  "test_shapes": ["16x256", "7x1000"], "edge_shapes": ["1x1", "3x7"],
	  "seed": 7 }
	EOF
	OMP_NUM_THREADS=1 AK_BENCH_WORKERS=${AK_BENCH_WORKERS_HOST:-alone 1 2} \
		throughput host c "--problem $W/small.json"
fi
for backend in ${AK_BENCH_BACKENDS:-cuda hip}; do
	test "$backend" = triton && continue
	test -x "$AK_BUILD/ak-runner-$backend" ||
		test -x "$AK_BUILD/../libexec/git-autokernel/ak-runner-$backend" ||
		continue
	grep -q "^$backend .*no device" "$table" && continue
	throughput "$backend" "$(test $backend = cuda && echo cu || echo hip)"
done

echo
cat "$table"
