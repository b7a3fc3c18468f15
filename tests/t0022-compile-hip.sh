#!/bin/sh
# Every HIP starter compiles for gfx90a where hipcc exists (CI installs
# Debian's); there is no AMD GPU to run them on.
. "$(dirname "$0")/lib.sh"
. "$TEST_DIR/compile-lib.sh"

if command -v hipcc >/dev/null; then
	compile_starters hip .hip
else
	test_skip "HIP starters build" "hipcc not found"
fi
test_done
