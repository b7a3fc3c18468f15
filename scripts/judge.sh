#!/bin/sh
# judge.sh: judge kernel candidates for one op through the tool's own loop,
# in a scratch repository, and keep what it says.
#
#   scripts/judge.sh [-b BACKEND] [-t N] [-T DURATION] [-f FIRST] [-o OUTDIR] [-r REPO] \
#           [-s "SHAPE..."] <op> [FILE[=MESSAGE] ...]
#
# Starts <op> on BACKEND (cuda) from the tool's starter (or from FIRST),
# commits each FILE over <op>/kernel.* in turn (the pre-commit hook builds,
# verifies and benchmarks it against the best so far; a slower or failing
# one is reset and kept as an attempt ref), then lets the tuner run N
# experiments on what was kept (or as many as fit in DURATION: 90s, 2m).
# With -s, the branch's workload is those shapes, equal weights (start
# --shape S:1 each) unless a shape says its own (S:W), so a candidate is
# kept only if it is faster over the list and slower at none of its
# shapes.  Weights of 1/(each shape's time) make each shape count by its
# relative change, where equal weights let the longest shape decide.
# Writes to OUTDIR (default ./judge-<op>):
#   report.md, report.svg   git autokernel report of the branch
#   log.txt                 git autokernel log --attempts, and each commit's
#                           hook output
#   best.<ext>              the kept kernel at the branch's tip
#   bench.txt               the tip against the baseline at every test
#                           shape (f16) and at the bench shape in bf16
# With -r, the scratch repository is REPO (made if missing, kept after):
# judging several ops in one repository measures the device's ceilings
# once.  Needs git-autokernel on PATH and a device for BACKEND.
set -u

backend=cuda tune=0 budget= first= out= repo= shapes=
while getopts b:t:T:f:o:r:s: opt; do
	case $opt in
	b) backend=$OPTARG ;;
	t) tune=$OPTARG ;;
	T) budget=$OPTARG ;;
	f) first=$OPTARG ;;
	o) out=$OPTARG ;;
	r) repo=$OPTARG ;;
	s) shapes=$OPTARG ;;
	*) echo "usage: $0 [-b BACKEND] [-t N] [-T DURATION] [-f FIRST] [-o OUTDIR] [-r REPO] [-s SHAPES] <op> [FILE[=MSG]...]" >&2
	   exit 2 ;;
	esac
done
shift $((OPTIND - 1))
test $# -ge 1 || { echo "$0: which op?" >&2; exit 2; }
op=$1
shift
out=${out:-judge-$op}
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 1

abspath () { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }

W=$(mktemp -d "${TMPDIR:-/tmp}/ak-judge-$op.XXXXXX") || exit 1
trap 'rm -rf "$W"' EXIT
test -n "$repo" || repo=$W/repo
if ! test -d "$repo/.git"; then
	git init -q -b main "$repo" &&
	git -C "$repo" -c user.name=judge -c user.email=judge@localhost \
		commit -q --allow-empty -m "scratch repository" || exit 1
fi
repo=$(cd "$repo" && pwd) || exit 1
export GIT_AUTHOR_NAME=${GIT_AUTHOR_NAME:-judge}
export GIT_AUTHOR_EMAIL=${GIT_AUTHOR_EMAIL:-judge@localhost}
export GIT_COMMITTER_NAME=$GIT_AUTHOR_NAME GIT_COMMITTER_EMAIL=$GIT_AUTHOR_EMAIL

log=$out/log.txt
: >"$log"
say () { printf '%s\n' "$*" | tee -a "$log"; }

test -n "$first" && first=$(abspath "$first")
# FILE=MESSAGE pairs, paths made absolute before the cd below
list=$W/candidates
: >"$list"
for c in "$@"; do
	f=${c%%=*}
	test -f "$f" || { echo "$0: no such file: $f" >&2; exit 2; }
	case $c in
	*=*) msg=${c#*=} ;;
	*) msg="candidate $(basename "$f")" ;;
	esac
	printf '%s\t%s\n' "$(abspath "$f")" "$msg" >>"$list"
done

cd "$repo" && git checkout -q main || exit 1
workload=
for s in $shapes; do
	case $s in *:*) ;; *) s=$s:1 ;; esac
	workload="$workload --shape $s"
done
say "== start $op --backend $backend${first:+ --from $first}$workload"
# shellcheck disable=SC2086
if ! git autokernel start "$op" --backend "$backend" ${first:+--from "$first"} \
	$workload >>"$log" 2>&1; then
	say "start failed; see $log"
	exit 1
fi
kernel=$(git ls-files "$op" | grep '/kernel\.' | head -1)
base=$(git rev-parse HEAD)

tab=$(printf '\t')
while IFS=$tab read -r f msg; do
	cp "$f" "$kernel" || exit 1
	say "== commit $(basename "$f"): $msg"
	git commit -q -a -m "$msg" </dev/null >>"$log" 2>&1
	say "   hook exit $? (tip: $(git log -1 --format=%s))"
	# a rejected candidate stays staged (git rolls back only the
	# locked index of commit -a); start the next one from the tip
	git reset -q --hard
done <"$list"

if test "$tune" -gt 0 || test -n "$budget"; then
	limits=
	test "$tune" -gt 0 && limits="--max-experiments $tune"
	test -n "$budget" && limits="$limits --budget $budget"
	say "== run --agent tune $limits"
	# shellcheck disable=SC2086
	git autokernel run --agent tune $limits </dev/null >>"$log" 2>&1
	say "   run exit $?"
fi

{
	echo "== log --attempts"
	git autokernel log --attempts
} >>"$log" 2>&1
git autokernel report -o "$out/report.md" >>"$log" 2>&1 ||
	say "report failed"
git show "HEAD:$kernel" >"$out/best.${kernel##*.}"
{
	echo "== tip $(git rev-parse --short HEAD) against the baseline $(git rev-parse --short "$base"), every test shape, f16"
	git autokernel bench HEAD --all-shapes --against "$base" 2>&1
	echo "== the same at the bench shape, bf16"
	git autokernel bench HEAD --dtype bf16 --against "$base" 2>&1
} >"$out/bench.txt"
git autokernel log | tee -a "$log"
git checkout -q main
