#!/bin/sh
# e2e: doc/examples' CPU MLP eager and patched with a host layernorm
# kernel (time, accuracy verdict, calls by path), a model none of whose
# ops was exported, a script that is not e2e's, --record, and which
# interpreter runs the driver.
. "$(dirname "$0")/lib.sh"

need_torch

MLP="$SRC_DIR/doc/examples/mlp.py"
small_problem layernorm >layernorm.json
small_problem softmax >softmax.json

# a model of Linear and ReLU: nothing the package has a kernel for
cat >plain.py <<'EOF'
import torch

def autokernel_model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU())
    return model, torch.randn(8, 32)
EOF
echo "import torch" >nomodel.py

test_setup 'branches for layernorm (verified at C=256) and softmax' '
	new_repo repo && cd repo &&
	git autokernel start layernorm --backend host \
		--problem ../layernorm.json >/dev/null 2>&1 &&
	git checkout -q main &&
	git autokernel start softmax --backend host \
		--problem ../softmax.json >/dev/null 2>&1 && cd ..
'

test_expect_success 'e2e on the MLP prints a speedup line and a verdict' '
	cd repo && { git autokernel e2e -- python3 "$MLP" >../mlp.out; rc=$?; } &&
	cat ../mlp.out &&
	grep "^speedup: [0-9.]*x" ../mlp.out &&
	if grep "^accuracy: pass" ../mlp.out; then test $rc = 0
	else grep "^accuracy: FAIL" ../mlp.out && test $rc = 1
	fi
'

test_expect_success 'it says which calls went to a kernel and which fell back' '
	grep "^patched: norm1 .*LayerNorm .*torch.ops.autokernel.layernorm" \
		mlp.out &&
	grep "^  layernorm  *64x256  *f32  *kernel  *2" mlp.out &&
	grep "^  softmax  *64x10  *f32  *fallback  *1  64x10: C=10 not verified" \
		mlp.out
'

test_expect_success 'e2e --json gives the result as JSON' '
	cd repo && { git autokernel e2e --json -- python3 "$MLP" 32 >../mlp.json
		test $? -le 1; } &&
	"$TORCH_PY" -c "
import json
r = json.load(open(\"../mlp.json\"))
assert r[\"kernel_calls\"] == 2 and not r[\"fell_back_everywhere\"], r
assert r[\"speedup\"] > 0 and r[\"reference_dtype\"] == \"f64\"
assert r[\"pass\"] == r[\"accuracy\"][\"pass\"]
assert r[\"time\"][\"timer\"] == \"perf_counter\"
assert {c[\"shape\"] for c in r[\"calls\"]} == {\"32x256\", \"32x10\"}, r
"
'

test_expect_success 'a model none of whose ops were exported falls back' '
	cd repo && git autokernel e2e -- python3 ../plain.py >../plain.out &&
	cat ../plain.out &&
	grep "^fell back everywhere: .*no speedup claimed" ../plain.out &&
	! grep "^speedup:" ../plain.out
'

test_expect_success 'a script without autokernel_model() is an error (exit 2)' '
	cd repo &&
	test_expect_code 2 git autokernel e2e -- python3 ../nomodel.py 2>err &&
	grep "defines no autokernel_model()" err
'

test_expect_success 'e2e runs scripts only (exit 2)' '
	cd repo && test_expect_code 2 git autokernel e2e -- python3 -m x 2>err &&
	grep "e2e runs a script" err
'

test_expect_success '--record writes the e2e object into the tip'"'"'s note' '
	cd repo && git notes --ref=autokernel show autokernel/layernorm >before &&
	{ git autokernel e2e layernorm --record -- python3 "$MLP" >out 2>err
		test $? -le 1; } &&
	grep "recorded the e2e result in the note of autokernel/layernorm" err &&
	git notes --ref=autokernel show autokernel/layernorm >after &&
	"$TORCH_PY" -c "
import json
before, after = json.load(open(\"before\")), json.load(open(\"after\"))
e2e = after.pop(\"e2e\")
assert after == before, \"the rest of the note changed\"
assert e2e[\"kernel_calls\"] == 2 and \"accuracy\" in e2e, e2e
assert e2e[\"kernels\"][0][\"name\"] == \"layernorm\"
"
'

test_expect_success 'e2e -o DIR uses the export in DIR, outside the repo' '
	(cd repo && git autokernel export layernorm -o ../pkg >/dev/null) &&
	mkdir elsewhere && cd elsewhere &&
	{ git autokernel e2e -o ../pkg -- python3 "$MLP" >out; test $? -le 1; } &&
	grep "^speedup:" out
'

mkdir -p bin && printf "#!/bin/sh\nexit 1\n" >bin/python3 && chmod +x bin/python3
if /usr/bin/python3 -c "import torch" 2>/dev/null; then
	test_expect_success 'python3 on PATH without torch is passed over' '
		PATH="$TRASH/bin:$PATH" git autokernel e2e --which-python >which &&
		test "$(cat which)" = /usr/bin/python3
	'
else
	test_skip 'python3 on PATH without torch is passed over' \
		"/usr/bin/python3 does not import torch"
fi

test_expect_success 'autokernel.python is used as given, or is the error' '
	git config --global autokernel.python "$TRASH/bin/python3" &&
	test_expect_code 3 git autokernel e2e --which-python 2>err &&
	git config --global --unset autokernel.python &&
	grep "autokernel.python: cannot import torch: $TRASH/bin/python3" err
'

test_done
