#!/bin/sh
# make bench: how long the harness takes.  Per op on the host: the wall
# time of a full five-stage verify and of a benchmark of the starter.  On
# every GPU backend that answers: one experiment of softmax as the loop
# makes it (a changed kernel committed: build, five stages, interleaved
# A/B benchmark against HEAD and the baseline, decision, records).
# A benchmark of the harness: it prints numbers and never fails on speed.
set -u
AK_BUILD=${AK_BUILD:-$(cd "$(dirname "$0")/.." && pwd)/build}
SRC=$(cd "$(dirname "$0")/.." && pwd)
PATH="$AK_BUILD:$PATH"
W=$(mktemp -d "${TMPDIR:-/tmp}/ak-bench.XXXXXX")
trap 'rm -rf "$W"' EXIT
export AUTOKERNEL_CACHE="$W/cache" HOME="$W"
export GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@localhost
export GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@localhost

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
for backend in cuda hip triton; do
	test "$backend" = triton || test -x "$AK_BUILD/ak-runner-$backend" ||
		test -x "$AK_BUILD/../libexec/git-autokernel/ak-runner-$backend" ||
		continue
	repo="$W/repo-$backend"
	git init -q "$repo" && cd "$repo" &&
		git commit -q --allow-empty -m init || exit 1
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
		sed -i 's/^#define BLOCK 256 /#define BLOCK 512 /' sm4/kernel.*
		git add sm4
		e=$(secs git commit -q -m "bench: four shapes, 512 threads a block")
		printf "%-5s softmax one experiment, 4 shapes          %6.2f s\n" \
			"$backend" "$e" | tee -a "$table"
		grep -E "bench |judged|verdict|error" "$W/last.out" | sed 's/^/      /'
	else
		echo "$backend: the four-shape start failed:"; tail -20 "$W/last.out"
	fi
	cd "$SRC" || exit 1
done
echo
cat "$table"
