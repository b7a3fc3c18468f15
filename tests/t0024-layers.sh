#!/bin/sh
# The parts depend on each other one way (doc/architecture.md): each
# quoted include names its folder, and a part includes only the parts
# below it.  A kernel sees only include/.
. "$(dirname "$0")/lib.sh"

# part: what it may include besides itself
LAYERS='
include:
lib:
ops: lib include
backends: lib include
verify: lib ops include
agent: lib ops
judge: lib ops verify backends
profile: lib ops
report: lib ops
export: lib ops backends
bin: lib ops verify backends agent judge profile report export include
kernels: include
'

# check_layers ROOT: every include of ROOT's parts is allowed; says which
# are not.  The headers of ROOT/include/ are included by their bare name.
check_layers () {
	echo "$LAYERS" | while read -r part may; do
		test -n "$part" || continue
		part=${part%:}
		find "$1/$part" -type f \( -name '*.c' -o -name '*.h' \
			-o -name '*.cu' -o -name '*.hip' \) | sort |
		while read -r f; do
			sed -n 's/^[ 	]*#[ 	]*include[ 	]*"\([^"]*\)".*/\1/p' "$f" |
			while read -r inc; do
				case $inc in
				*/*) to=${inc%%/*} ;;
				*) test -f "$1/include/$inc" && to=include ||
					to="(no folder)" ;;
				esac
				case " $part $may " in
				*" $to "*) ;;
				*) echo "${f#$1/} includes \"$inc\": $part/ may" \
					"include ${may:-nothing but itself}" ;;
				esac
			done
		done
	done >"$TRASH/layers.out"
	cat "$TRASH/layers.out"
	test ! -s "$TRASH/layers.out"
}

test_expect_success 'every include of the tool runs down the stack' '
	check_layers "$SRC_DIR"
'

test_expect_success 'every folder of C sources is in the table' '
	for d in "$SRC_DIR"/*/; do
		d=${d%/} && d=${d##*/}
		case $d in build*|tests) continue ;; esac
		find "$SRC_DIR/$d" -name "*.[ch]" -o -name "*.cu" >files
		if test -s files && ! echo "$LAYERS" | grep -q "^$d:"; then
			echo "$d/ is not in the table"
		fi
	done >missing &&
	cat missing &&
	test ! -s missing
'

test_setup 'a copy of the sources' '
	mkdir src &&
	for part in include lib ops backends verify agent judge profile \
		    report export bin kernels; do
		cp -R "$SRC_DIR/$part" src/ || break
	done
'

test_expect_success 'an include up the stack is found' '
	check_layers src &&
	printf "#include \"judge/judge.h\"\n" >>src/agent/tune.c &&
	! check_layers src >out &&
	grep "agent/tune.c includes \"judge/judge.h\": agent/ may include lib ops" out
'

test_expect_success 'an include without its folder is found' '
	printf "#include \"strbuf.h\"\n" >>src/verify/bench.c &&
	printf "#include \"lib/strbuf.h\"\n" >>src/kernels/host/softmax.c &&
	! check_layers src >out &&
	grep "verify/bench.c includes \"strbuf.h\"" out &&
	grep "kernels/host/softmax.c includes \"lib/strbuf.h\": kernels/ may include include" out
'

test_done
