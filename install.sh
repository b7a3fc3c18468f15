#!/bin/sh
# install.sh [PREFIX]: install git-autokernel and what it needs on Debian
# or Ubuntu.  Installs the Debian packages (with sudo when not root),
# builds, and installs under PREFIX (default /usr/local as root, else
# ~/.local).  Safe to run again.
set -u

PACKAGES="build-essential pkg-config git libgit2-dev libcurl4-openssl-dev \
libjansson-dev zlib1g-dev python3 man-db"

step () { printf '==> %s\n' "$*"; }
fail () { printf 'install.sh: %s\n' "$*" >&2; exit 1; }

cd "$(dirname "$0")" || fail "cannot enter the source directory"
if test "$(id -u)" = 0; then
	SUDO= PREFIX=${1:-${PREFIX:-/usr/local}}
else
	SUDO=sudo PREFIX=${1:-${PREFIX:-$HOME/.local}}
fi

missing=
for p in $PACKAGES; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing="$missing $p"
done
if test -n "$missing"; then
	step "installing Debian packages:$missing"
	command -v apt-get >/dev/null ||
		fail "step 1 (packages) failed: no apt-get; install:$missing"
	if test -n "$SUDO" && ! command -v sudo >/dev/null; then
		fail "step 1 (packages) failed: not root and no sudo; install:$missing"
	fi
	$SUDO apt-get update -qq ||
		fail "step 1 (packages) failed: apt-get update"
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing \
		>/dev/null || fail "step 1 (packages) failed: apt-get install$missing"
else
	step "Debian packages: all present"
fi

step "building"
make -j"$(nproc 2>/dev/null || echo 2)" >build.log 2>&1 ||
	{ tail -n 30 build.log >&2; fail "step 2 (build) failed; see build.log"; }

step "installing under $PREFIX"
make install PREFIX="$PREFIX" >>build.log 2>&1 ||
	{ tail -n 30 build.log >&2; fail "step 3 (install) failed; see build.log"; }

case ":$PATH:" in
*":$PREFIX/bin:"*) ;;
*) printf 'note: add %s/bin to your PATH:\n  export PATH="%s/bin:$PATH"\n' \
	"$PREFIX" "$PREFIX" ;;
esac
step "done: $("$PREFIX/bin/git-autokernel" --version)"
