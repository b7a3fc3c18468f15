#!/bin/sh
# bundle-libs.sh DIR: copy into DIR/lib every shared library the binaries
# in DIR/bin and DIR/libexec need that is not part of glibc or the GPU
# driver stack, so the tree runs on a machine without them (the binaries
# look in $ORIGIN/../lib first).
set -eu
dir=$1
mkdir -p "$dir/lib"
for bin in "$dir"/bin/* "$dir"/libexec/git-autokernel/*; do
	test -f "$bin" || continue
	ldd "$bin" 2>/dev/null | awk '/=> \// { print $3 }'
done | sort -u | while read -r lib; do
	case $(basename "$lib") in
	libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|\
	libgcc_s.so*|libstdc++.so*|libgomp.so*|libcuda.so*|libcudart.so*|\
	libamdhip64.so*|libresolv.so*)
		continue ;;
	esac
	cp -L "$lib" "$dir/lib/"
done
echo "bundled: $(ls "$dir/lib" | tr '\n' ' ')"
