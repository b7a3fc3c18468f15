#!/bin/sh
# export: the newest verified kept kernel of each autokernel branch as a
# Python package; torch.ops.autokernel.* from it against fp64, the guard's
# fallback and stats(), an install by pip offline, patch() on a model.
. "$(dirname "$0")/lib.sh"

need_torch

small_problem softmax >softmax.json
small_problem rmsnorm >rmsnorm.json

# check-ops.py PARENT: each op of the package in each verified dtype, on a
# verified shape, within problem.json's tolerance of the fp64 reference
cat >check-ops.py <<'EOF'
import sys, torch
sys.path.insert(0, sys.argv[1])
import autokernel_ops as ak

def within(y, ref, tol):
    bound = tol["atol"] + tol["rtol"] * ref.abs()
    return bool(((y.double() - ref).abs() <= bound).all())

torch.manual_seed(1)
tols = {k["name"]: k["tolerances"] for k in ak.kernels()}
for name, dt in (("f16", torch.float16), ("bf16", torch.bfloat16),
                 ("f32", torch.float32)):
    x = torch.randn(7, 1000).to(dt)
    w = (torch.rand(1000) + 0.5).to(dt)
    xd, wd = x.double(), w.double()
    y = torch.ops.autokernel.softmax(x)
    assert y.dtype == dt and within(y, torch.softmax(xd, -1),
                                    tols["softmax"][name]), name
    ref = xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + 1e-6) * wd
    y = torch.ops.autokernel.rmsnorm(x, w, 1e-6)
    assert y.dtype == dt and within(y, ref, tols["rmsnorm"][name]), name
assert {r["path"] for r in ak.stats()} == {"kernel"}, ak.stats()
print("accurate")
EOF

# check-guard.py PARENT: calls the kernel was not verified for
cat >check-guard.py <<'EOF'
import sys, torch
sys.path.insert(0, sys.argv[1])
import autokernel_ops as ak

x = torch.randn(4, 10)
assert torch.allclose(torch.ops.autokernel.softmax(x), torch.softmax(x, -1))
torch.ops.autokernel.softmax(torch.randn(16, 256, dtype=torch.float64))
torch.ops.autokernel.softmax(torch.randn(256, 16).t())
torch.ops.autokernel.softmax(torch.randn(16, 256, requires_grad=True))
for r in ak.stats():
    print("%(name)s %(shape)s %(dtype)s %(path)s %(calls)d: %(reason)s" % r)
EOF

# check-patch.py PARENT FIXTURES: a block with transformers' RMSNorm, a
# LayerNorm (not exported) and a softmax, patched and unpatched
cat >check-patch.py <<'EOF'
import sys, torch
from torch import nn
sys.path[:0] = sys.argv[1:3]
import autokernel_ops as ak
from llama_like import LlamaRMSNorm

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = LlamaRMSNorm(256)
        self.proj = nn.Linear(256, 256)
        self.ln = nn.LayerNorm(256)
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, x):
        return self.softmax(self.ln(self.proj(self.norm(x))))

torch.manual_seed(0)
model = Block().eval()
x = torch.randn(16, 256)
with torch.no_grad():
    model.norm.weight.uniform_(0.5, 1.5)
    eager = model(x)
    for r in ak.patch(model):
        print("replaced %(path)s %(kind)s %(op)s" % r)
    patched = model(x)
for r in ak.stats():
    print("called %(name)s %(shape)s %(path)s %(calls)d" % r)
print("max difference %.3g" % (patched - eager).abs().max().item())
assert torch.allclose(patched, eager, rtol=1e-4, atol=1e-6)
ak.unpatch()
assert "forward" not in model.norm.__dict__
assert not hasattr(torch.nn.functional.softmax, "_autokernel")
with torch.no_grad():
    assert torch.equal(model(x), eager)
print("unpatched")
EOF

# check-llama.py PARENT FIXTURES: a Llama-like block (tests/fixtures)
cat >check-llama.py <<'EOF'
import sys, torch
sys.path[:0] = sys.argv[1:3]
import autokernel_ops as ak
from llama_like import Block

torch.manual_seed(0)
model = Block().eval()
x = torch.randn(2, 4, 32)
labels = torch.randint(0, 256, (2, 4))
labels[1, 3] = -100
with torch.no_grad():
    model.input_layernorm.weight.uniform_(0.5, 1.5)
    eager = model(x, labels)
    report = ak.patch(model)
    patched = model(x, labels)
for r in report:
    print("replaced %(path)s %(kind)s %(op)s" % r)
for r in report.skipped:
    print("skipped %(path)s %(op)s: %(reason)s" % r)
for r in ak.stats():
    print("called %(name)s %(shape)s %(path)s: %(reason)s" % r)
for e, p in zip(eager, patched):
    assert torch.allclose(e, p, rtol=1e-4, atol=1e-5), (e - p).abs().max()
print("agrees")
EOF

# check-fake.py PARENT: the Meta kernel gives FakeTensorMode the result's
# shape and dtype without running anything
cat >check-fake.py <<'EOF'
import sys, torch
from torch._subclasses import FakeTensorMode
sys.path.insert(0, sys.argv[1])
import autokernel_ops as ak

with FakeTensorMode():
    y = torch.ops.autokernel.rmsnorm(torch.empty(3, 5, 256), torch.empty(256))
assert y.shape == (3, 5, 256) and y.dtype == torch.float32, y
assert ak.stats() == [], ak.stats()
print("traced")
EOF

test_setup 'two branches: softmax and rmsnorm' '
	new_repo repo && cd repo &&
	git autokernel start softmax --backend host --problem ../softmax.json \
		>/dev/null 2>&1 &&
	git checkout -q main &&
	git autokernel start rmsnorm --backend host --problem ../rmsnorm.json \
		>/dev/null 2>&1 && cd ..
'

test_expect_success 'export writes a package of both branches' '
	cd repo && git autokernel export -o ../out/autokernel_ops >../export.out &&
	grep "exported autokernel/softmax at .* as torch.ops.autokernel.softmax" \
		../export.out &&
	grep "exported autokernel/rmsnorm at" ../export.out &&
	for f in __init__.py setup.py manifest.json include/autokernel.h \
		kernels/softmax/problem.json kernels/softmax/kernel.c \
		kernels/rmsnorm/kernel.c; do
		test -f ../out/autokernel_ops/$f || return 1
	done &&
	! test -e ../out/autokernel_ops/pyproject.toml
'

test_expect_success 'the manifest says what was verified where, and how built' '
	cd repo && softmax=$(git rev-parse autokernel/softmax) &&
	"$TORCH_PY" -c "
import json, os
m = json.load(open(\"../out/autokernel_ops/manifest.json\"))
k = {x[\"name\"]: x for x in m[\"kernels\"]}[\"softmax\"]
assert k[\"commit\"] == \"$softmax\", k[\"commit\"]
assert k[\"op\"] == \"softmax\" and k[\"backend\"] == \"host\"
assert k[\"dtypes\"] == [\"f16\", \"bf16\", \"f32\"]
assert k[\"shapes\"][\"test\"] == [\"16x256\", \"7x1000\"], k[\"shapes\"]
assert k[\"device\"][\"arch\"] and k[\"device\"][\"name\"]
assert \"-march=native\" in k[\"build\"][\"flags\"]
assert k[\"build\"][\"command\"].startswith(k[\"build\"][\"compiler\"])
assert k[\"build\"][\"version\"]
assert os.path.isfile(\"../out/autokernel_ops/\" + k[\"files\"][\"object\"])
"
'

test_expect_success 'torch.ops.autokernel gives the fp64 reference answer' '
	"$TORCH_PY" check-ops.py out >ops.out && grep accurate ops.out
'

test_expect_success 'the guard sends unverified calls to PyTorch, stats() says why' '
	"$TORCH_PY" check-guard.py out >guard.out && cat guard.out &&
	grep "^softmax 4x10 f32 fallback 1: 4x10: C=10 not verified" guard.out &&
	grep "^softmax 16x256 f64 fallback 1: f64 not verified" guard.out &&
	grep "^softmax 16x256 f32 fallback 1: a non-contiguous tensor" \
		guard.out &&
	grep "^softmax 16x256 f32 fallback 1: autograd" guard.out
'

test_expect_success 'patch() replaces what matches an exported op' '
	"$TORCH_PY" check-patch.py out "$TEST_DIR/fixtures" >patch.out &&
	cat patch.out &&
	grep "^replaced norm LlamaRMSNorm rmsnorm" patch.out &&
	grep "^replaced softmax Softmax softmax" patch.out &&
	grep "^replaced torch.nn.functional.softmax function softmax" \
		patch.out &&
	! grep "^replaced ln" patch.out
'

test_expect_success 'the patched model runs the kernels and agrees with eager' '
	grep "^called rmsnorm 16x256 kernel 1" patch.out &&
	grep "^called softmax 16x256 kernel 1" patch.out &&
	! grep "fallback" patch.out
'

test_expect_success 'unpatch() restores the model and the functions' '
	grep "^unpatched" patch.out
'

test_expect_success 'FakeTensorMode traces an op through its Meta kernel' '
	"$TORCH_PY" check-fake.py out >fake.out && grep traced fake.out
'

test_setup 'branches for the rest of a Llama block' '
	cd repo && for op in fused_mlp flash_attention cross_entropy \
		rotary_embedding; do
		small_problem $op >../$op.json && git checkout -q main &&
		git autokernel start $op --backend host --problem ../$op.json \
			>/dev/null 2>&1 || return 1
	done &&
	git autokernel export -o ../llama/autokernel_ops >/dev/null && cd .. &&
	"$TORCH_PY" check-llama.py llama "$TEST_DIR/fixtures" >llama.out
'

test_expect_success 'patch() finds a Llama block'"'"'s norm, MLP, attention, loss' '
	cat llama.out &&
	grep "^replaced input_layernorm LlamaRMSNorm rmsnorm" llama.out &&
	grep "^replaced mlp LlamaMLP fused_mlp" llama.out &&
	grep "^replaced loss CrossEntropyLoss cross_entropy" llama.out &&
	grep "^replaced torch.nn.functional.scaled_dot_product_attention function flash_attention" \
		llama.out
'

test_expect_success 'their calls go to the kernels; the patched block agrees' '
	grep "^called rmsnorm 8x32 kernel" llama.out &&
	grep "^called fused_mlp 8x32x48 kernel" llama.out &&
	grep "^called flash_attention 2x2x4x16 kernel" llama.out &&
	grep "^agrees" llama.out
'

test_expect_success 'a loss whose targets hold ignore_index falls back' '
	grep "^called cross_entropy 8x256 fallback: ignore_index -100 is among the targets" \
		llama.out
'

test_expect_success 'rotary is not patched: the layouts differ, it says' '
	grep "^skipped rotary_emb rotary_embedding: .*interleaved pairs.*rotate_half" \
		llama.out && ! grep "^replaced rotary" llama.out
'

if "$TORCH_PY" -m pip --version >/dev/null 2>&1; then
	test_expect_success 'pip installs the package offline; it imports' '
		"$TORCH_PY" -m pip install -q --no-index --no-deps \
			--target site out/autokernel_ops 2>pip.err &&
		test -f site/autokernel_ops/manifest.json &&
		ls site/autokernel_ops/kernels/softmax/*.so &&
		PYTHONPATH=site "$TORCH_PY" -c "
import autokernel_ops as ak, torch
assert ak.__file__.startswith(\"$TRASH/site/\"), ak.__file__
torch.ops.autokernel.softmax(torch.randn(16, 256))
assert ak.stats()[0][\"path\"] == \"kernel\", ak.stats()
"
	'
else
	test_skip 'pip installs the package offline' "no pip for $TORCH_PY"
fi

test_expect_success 'an unverified tip exports its newest verified commit' '
	cd repo && git checkout -q autokernel/softmax &&
	echo "/* unchecked */" >>softmax/kernel.c &&
	git commit -q --no-verify -m "skipped the hooks" softmax/kernel.c &&
	tip=$(git rev-parse --short=7 HEAD) &&
	kept=$(git rev-parse --short=7 HEAD~1) &&
	git autokernel export autokernel/softmax -o ../tip 2>../tip.err &&
	grep "warning: autokernel/softmax: the tip $tip is unverified" \
		../tip.err &&
	grep "exporting $kept, its newest verified kept commit" ../tip.err &&
	grep "\"commit\": \"$(git rev-parse HEAD~1)\"" ../tip/manifest.json
'

test_expect_success 'export takes an experiment by name, one at a time' '
	cd repo && git autokernel export rmsnorm -o ../one >../one.out &&
	grep "autokernel/rmsnorm" ../one.out && ! grep softmax ../one.out &&
	! test -d ../one/kernels/softmax
'

test_expect_success 'export replaces an earlier export in place' '
	cd repo && git autokernel export softmax -o ../one &&
	test -d ../one/kernels/softmax && ! test -d ../one/kernels/rmsnorm
'

test_expect_success 'export refuses a directory of other files (exit 3)' '
	cd repo && mkdir ../mine && echo keep >../mine/notes.txt &&
	test_expect_code 3 git autokernel export -o ../mine 2>err &&
	grep "holds files but no export" err && test -f ../mine/notes.txt
'

test_expect_success 'an unknown revision is a usage error (exit 2)' '
	cd repo && test_expect_code 2 git autokernel export nosuch -o ../x 2>err &&
	grep "nosuch" err && ! test -e ../x
'

test_done
