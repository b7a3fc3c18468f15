#!/bin/sh
# The cell around candidate code on the CUDA backend (doc/sandbox.md,
# the cases in tests/cell-lib.sh): the host code of a .cu kernel gets no
# secret out of its environment, a file it can read or nvcc's, writes
# nothing outside its scratch directory and connects nowhere, while the
# runner still reaches the GPU: an honest kernel is still kept.
. "$(dirname "$0")/../lib.sh"
. "$TEST_DIR/cell-lib.sh"

backend=cuda ext=cu cc_var=AUTOKERNEL_NVCC
base="$TEST_DIR/kernels/softmax-f32.cu"
marker='/\* HOST_BREAK \*/'
# twenty launches for one: the baseline an honest candidate beats
slow='for (int i = 0; i < 20; i++) softmax_rows<<<rows, THREADS, 0, stream>>>(x, y, rows, cols);'
cell_cases
test_done
