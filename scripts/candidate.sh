#!/bin/sh
# scripts/candidate.sh PATCH[:NAME=VALUE,...] OUT: a kernel candidate of
# scripts/candidates/ made into a file for judge.sh.  PATCH (a name in
# scripts/candidates/, or a path) is a unified diff of one starter (its
# +++ line names kernels/<backend>/<op>.<ext>); OUT is that starter with
# the patch applied and each tunable NAME's #define set to VALUE.
# Candidates live as patches so that one a session could not judge is
# kept, small, and fails loudly (exit 1, with the reason) once its
# starter has moved under it.
set -u
spec=${1:?usage: scripts/candidate.sh PATCH[:NAME=VALUE,...] OUT}
out=${2:?usage: scripts/candidate.sh PATCH[:NAME=VALUE,...] OUT}
src=$(cd "$(dirname "$0")/.." && pwd) || exit 2
unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE

p=${spec%%:*} defs=
case $spec in *:*) defs=${spec#*:} ;; esac
case $p in /*) ;; *) test -f "$p" || p=$src/scripts/candidates/$p ;; esac
test -f "$p" || { echo "$0: no such patch: ${spec%%:*}" >&2; exit 2; }
p=$(cd "$(dirname "$p")" && pwd)/$(basename "$p")
target=$(sed -n 's@^+++ b/\([^	]*\).*@\1@p' "$p" | head -1)
case $target in
kernels/*/*.*) ;;
*) echo "$0: $(basename "$p") patches no starter (+++ b/kernels/...)" >&2; exit 1 ;;
esac
test "$(grep -c '^+++ ' "$p")" = 1 ||
	{ echo "$0: $(basename "$p") patches more than one file" >&2; exit 1; }
test -f "$src/$target" || { echo "$0: no starter $target" >&2; exit 1; }

w=$(mktemp -d "${TMPDIR:-/tmp}/ak-candidate.XXXXXX") || exit 2
trap 'rm -rf "$w"' EXIT
mkdir -p "$w/$(dirname "$target")" && cp "$src/$target" "$w/$target" || exit 2
# outside any repository, even where TMPDIR lies inside one (git apply
# in a work tree applies to it)
if ! (cd "$w" && GIT_CEILING_DIRECTORIES=$(dirname "$w") git apply "$p" 2>"$w/err"); then
	echo "$0: $(basename "$p") no longer applies to $target:" >&2
	cat "$w/err" >&2
	exit 1
fi
for d in $(echo "$defs" | tr , ' '); do
	n=${d%%=*} v=${d#*=}
	case $d in
	*=*=* | =* | *= | *[!A-Za-z0-9_.=]*)
		echo "$0: bad setting '$d' (NAME=VALUE)" >&2; exit 2 ;;
	*=*) ;;
	*) echo "$0: bad setting '$d' (NAME=VALUE)" >&2; exit 2 ;;
	esac
	grep -q "^#define $n .*autokernel: tune" "$w/$target" ||
		{ echo "$0: $n is no tunable of $target" >&2; exit 1; }
	sed -i "s/^#define $n [^ 	]*/#define $n $v/" "$w/$target" || exit 2
done
cp "$w/$target" "$out"
