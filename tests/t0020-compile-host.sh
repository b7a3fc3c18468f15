#!/bin/sh
# Every host starter compiles through the tool.
. "$(dirname "$0")/lib.sh"
. "$TEST_DIR/compile-lib.sh"

compile_starters host .c
test_done
