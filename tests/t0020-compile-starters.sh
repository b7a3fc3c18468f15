#!/bin/sh
# Every starter kernel compiles for its backend where the compiler exists
# (nvcc for CUDA, hipcc for HIP); the GPU suite runs them.
. "$(dirname "$0")/lib.sh"

starters () {
	backend=$1 ext=$2
	for f in "$SRC_DIR"/kernels/$backend/*$ext "$SRC_DIR"/kernels/$backend/naive/*$ext; do
		test -f "$f" || continue
		op=$(basename "$f" "$ext")
		variant=$(basename "$(dirname "$f")")
		dir=$backend-$variant/$op
		mkdir -p "$dir" &&
		small_problem "$op" | sed -e "s/\"backend\": \"host\"/\"backend\": \"$backend\"/" \
			-e "s/\"kernel.c\"/\"kernel$ext\"/" >"$dir/problem.json" &&
		cp "$f" "$dir/kernel$ext" &&
		echo "$dir"
	done
}

for d in $(starters host .c); do
	test_expect_success "host starter $d builds" "git autokernel verify --build-only $d"
done

if command -v nvcc >/dev/null || test -x /usr/local/cuda/bin/nvcc; then
	for d in $(starters cuda .cu); do
		test_expect_success "CUDA starter $d builds for sm_90" \
			"git autokernel verify --build-only $d"
	done
else
	test_skip "CUDA starters build" "nvcc not found"
fi

if command -v hipcc >/dev/null; then
	for d in $(starters hip .hip); do
		test_expect_success "HIP starter $d builds for gfx90a" \
			"git autokernel verify --build-only $d"
	done
else
	test_skip "HIP starters build" "hipcc not found"
fi

test_done
