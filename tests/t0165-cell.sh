#!/bin/sh
# The cell around candidate code on the host backend (doc/sandbox.md,
# the cases in tests/cell-lib.sh): a kernel gets no secret out of its
# environment, a file it can read or the compiler's, writes nothing
# outside its scratch directory and connects nowhere; an honest kernel
# is still kept.
. "$(dirname "$0")/lib.sh"
. "$TEST_DIR/cell-lib.sh"

backend=host ext=c cc_var=AUTOKERNEL_CC
base="$TEST_DIR/kernels/softmax-f32.c"
marker='/\* BREAK \*/'
# thirty times the work: the baseline an honest candidate beats
slow='{ static int d; if (d < 30) { d++; ak_kernel(a); d--; } }'
cell_cases
test_done
