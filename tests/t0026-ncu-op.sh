#!/bin/sh
# scripts/ncu-op.py, the driver that lets a profiler see one op's kernel
# and PyTorch's op without the runner: on the host backend it builds each
# host starter, calls it through the ABI from Python on the op's tensors,
# and agrees with PyTorch's op (python/torch_ref/); a wrong kernel shows
# as a difference, a failing one as an error.
. "$(dirname "$0")/lib.sh"

need_torch
NCU_OP=$SRC_DIR/scripts/ncu-op.py

# op shape dtype, and the largest difference allowed from PyTorch
while read -r op shape dt tol; do
	test_expect_success "$op $shape $dt: the host starter through the ABI agrees with PyTorch" '
		"$TORCH_PY" "$NCU_OP" $op $shape $dt --backend host --torch --calls 2 >out 2>&1 &&
		grep "^$op $shape $dt: 2 calls of the kernel and of PyTorch" out &&
		test $(grep -c "largest difference" out) = 3 &&
		sed -n "s/.*largest difference //p" out |
			awk -v tol=$tol "\$1 + 0 > tol { bad = 1 } END { exit bad }"
	'
done <<EOF
matmul 64x48x32 f32 1e-4
softmax 16x256 f32 1e-6
layernorm 8x768 bf16 0.07
rmsnorm 8x512 f32 1e-5
cross_entropy 16x1000 f32 1e-4
reduce 8x1000 f32 1e-3
rotary_embedding 1x2x16x32 f32 1e-5
flash_attention 1x2x33x16 f32 1e-5
fused_mlp 8x32x48 f32 1e-4
EOF

test_expect_success 'a kernel that leaves its output half done shows as a difference' '
	sed "s/^int ak_kernel(/static int honest(/" "$SRC_DIR/kernels/host/reduce.c" >half.c &&
	cat >>half.c <<-\EOC &&
	int ak_kernel(const struct ak_args *a)
	{
		int r = honest(a);
		float *y = (float *)a->out[0].data;

		y[0] += 1.0f;
		return r;
	}
	EOC
	"$TORCH_PY" "$NCU_OP" reduce 8x1000 f32 --src half.c --backend host --torch >out 2>&1 &&
	grep "largest difference 1$" out
'

test_expect_success 'a kernel that fails, or does not build, is an error' '
	printf "%s\n" "#include \"autokernel.h\"" \
		"int ak_kernel(const struct ak_args *a) { (void)a; return 3; }" >fail.c &&
	test_must_fail "$TORCH_PY" "$NCU_OP" reduce 8x1000 f32 --src fail.c --backend host >out 2>&1 &&
	grep "ak_kernel returned 3" out &&
	echo "not C" >broken.c &&
	test_must_fail "$TORCH_PY" "$NCU_OP" reduce 8x1000 f32 --src broken.c --backend host >out 2>&1 &&
	grep "build failed" out
'

test_expect_success 'the CUDA backend without a device says so' '
	if "$TORCH_PY" -c "import torch, sys; sys.exit(torch.cuda.is_available())"; then
		test_must_fail "$TORCH_PY" "$NCU_OP" reduce 8x1000 f16 >out 2>&1 &&
		grep "no CUDA device" out
	fi
'

test_done
