#!/bin/sh
# Starters stay one file each, so helpers that two of them need are
# written into both.  Each such copy is a marked region,
#
#	/* ---- shared: NAME (kept equal in a.cu, b.cu; tests/t0023-...) ---- */
#	...
#	/* ---- end shared: NAME ---- */
#
# (in Python, the Triton starters: "# ---- shared: ... ----" and
# "# ---- end shared: NAME ----"), and every file the marker names holds
# the same region, to the byte.
. "$(dirname "$0")/lib.sh"

# region FILE NAME: region NAME of FILE, markers included; fails unless
# FILE holds it once, with its end.
region () {
	awk -v name="$2" '
		index($0, "/* ---- shared: " name " (") == 1 ||
		index($0, "# ---- shared: " name " (") == 1 { n++; on = 1 }
		on { print }
		on && ($0 == "/* ---- end shared: " name " ---- */" ||
		       $0 == "# ---- end shared: " name " ----") {
			on = 0
			ends++
		}
		END { exit !(n == 1 && ends == 1) }
	' "$1"
}

# check_twins DIR: every region marked in DIR/*/* is in every file its
# marker names (beside it), the same; says what differs.
check_twins () {
	found=0 bad=0
	for k in "$1"/*/*; do
		test -f "$k" || continue
		grep '^\(/\*\|#\) ---- shared: ' "$k" >"$TRASH/markers" || continue
		while read -r line; do
			found=$((found + 1))
			name=$(echo "$line" |
				sed 's@^\(/\*\|#\) ---- shared: \([^ ]*\) .*@\2@')
			files=$(echo "$line" |
				sed -n 's|.*(kept equal in \([^;]*\);.*|\1|p' | tr -d ,)
			case " $files " in
			*" ${k##*/} "*) ;;
			*) echo "$k: '$name' does not name its own file"; bad=1 ;;
			esac
			region "$k" "$name" >"$TRASH/a" || {
				echo "$k: '$name' is not one region with an end"
				bad=1
			}
			for f in $files; do
				region "${k%/*}/$f" "$name" >"$TRASH/b" &&
				cmp -s "$TRASH/a" "$TRASH/b" || {
					echo "${k%/*}/$f: '$name' differs from $k's:"
					diff "$TRASH/a" "$TRASH/b" | head -n 10
					bad=1
				}
			done
		done <"$TRASH/markers"
	done
	test $found -gt 0 || { echo "no shared regions under $1"; bad=1; }
	return $bad
}

test_expect_success 'the shared regions of the starters are equal' '
	check_twins "$SRC_DIR/kernels" >out &&
	cat out &&
	grep -c "^/\* ---- shared: " "$SRC_DIR"/kernels/cuda/*.cu >count &&
	grep "matmul.cu:[1-9]" count &&
	grep -c "^# ---- shared: " "$SRC_DIR"/kernels/triton/*.py >count &&
	grep "softmax.py:[1-9]" count && grep "rmsnorm.py:[1-9]" count
'

test_setup 'a copy of the starters' '
	cp -R "$SRC_DIR/kernels" k
'

test_expect_success 'a line changed in one copy is found' '
	sed "/^static __device__ __forceinline__ void mbar_arrive(uint32_t bar)/,/^}/s/_, \[%0\]/_, [%0] /" \
		k/cuda/fused_mlp.cu >changed &&
	! cmp -s changed k/cuda/fused_mlp.cu &&
	cp k/cuda/fused_mlp.cu saved &&
	cp changed k/cuda/fused_mlp.cu &&
	! check_twins k >out &&
	grep "fused_mlp.cu: .mbarrier-tma-wgmma. differs" out &&
	cp saved k/cuda/fused_mlp.cu &&
	check_twins k
'

test_expect_success 'in a Triton starter too' '
	sed "s/block \/\/ 256))$/block \/\/ 128))/" k/triton/rmsnorm.py >changed &&
	! cmp -s changed k/triton/rmsnorm.py &&
	cp k/triton/rmsnorm.py saved && cp changed k/triton/rmsnorm.py &&
	! check_twins k >out &&
	grep "rmsnorm.py: .row_launch. differs" out &&
	cp saved k/triton/rmsnorm.py &&
	check_twins k
'

test_expect_success 'a region missing from one copy is found' '
	grep -v "^/\* ---- end shared: compute-capability ---- \*/" \
		k/cuda/flash_attention.cu >cut &&
	cp cut k/cuda/flash_attention.cu &&
	! check_twins k >out &&
	grep "compute-capability" out
'

test_done
