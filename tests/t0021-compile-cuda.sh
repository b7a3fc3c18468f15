#!/bin/sh
# Every CUDA starter compiles for sm_90a where nvcc exists (CI has it);
# the GPU suite (make check-gpu) runs them on a device.
. "$(dirname "$0")/lib.sh"
. "$TEST_DIR/compile-lib.sh"

if command -v nvcc >/dev/null || test -x /usr/local/cuda/bin/nvcc; then
	compile_starters cuda .cu
else
	test_skip "CUDA starters build" "nvcc not found"
fi
test_done
