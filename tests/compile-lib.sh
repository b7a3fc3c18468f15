# tests/compile-lib.sh: compile_starters BACKEND EXT COMPILER-NAME: a test
# per starter (kernels/BACKEND/*EXT and naive/) that it builds through the
# tool, no device needed.  Sourced after lib.sh.
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

compile_starters () {
	for d in $(starters "$1" "$2"); do
		test_expect_success "$1 starter $d builds" \
			"git autokernel verify --build-only $d"
	done
}
