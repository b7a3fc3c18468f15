#!/usr/bin/env python3
"""
torch-ref-ops.py PYTHON_DIR: the op() of each python/torch_ref/ module,
what its compiled/ twin hands torch.compile, against the ak_kernel() that
bench --torch times (and the harness checks), on the CPU, where there is
no torch.compile to run: torch.compile is stood in for by the function
itself.  Each must give the output's dtype and shape and the same values.
Prints what differs; exit 1 if anything does.
"""
import importlib
import os
import sys
import types

sys.path.insert(0, sys.argv[1])
import torch  # noqa: E402

# where torch.compile would run: torch 2, a CUDA device, triton
torch.compile = lambda fn, dynamic=None: fn
dynamo = types.ModuleType("torch._dynamo")
dynamo.config = types.SimpleNamespace(cache_size_limit=8)
sys.modules["torch._dynamo"] = dynamo
torch._dynamo = dynamo
sys.modules.setdefault("triton", types.ModuleType("triton"))
os.environ["AUTOKERNEL_TRITON_DEVICE"] = "cuda"


class Args:
    def __init__(self, inp, out, scalar):
        self.inp, self.out, self.scalar = inp, out, scalar


def case(op, dt):
    """(inputs, output, scalar) of op at a small shape in dtype dt."""
    g = torch.Generator().manual_seed(1)

    def r(*shape):
        return torch.randn(*shape, generator=g).to(dt)
    x, bhsd = r(8, 64), (1, 2, 8, 16)
    cases = {
        "softmax": ([x], x, 0.0),
        "reduce": ([x], x[:, 0], 0.0),
        "layernorm": ([x, r(64), r(64)], x, 1e-5),
        "rmsnorm": ([x, r(64)], x, 1e-6),
        "cross_entropy": ([x, torch.randint(0, 64, (8,), generator=g)],
                          torch.zeros((), dtype=torch.float32), 0.0),
        "matmul": ([r(8, 16), r(16, 24)], r(8, 24), 0.0),
        "rotary_embedding": ([r(*bhsd), r(8, 8), r(8, 8)], r(*bhsd), 0.0),
        "rotary_half": ([r(*bhsd), r(8, 8), r(8, 8)], r(*bhsd), 1.0),
        "flash_attention": ([r(*bhsd), r(*bhsd), r(*bhsd)], r(*bhsd),
                            16 ** -0.5),
        "fused_mlp": ([r(4, 16), r(32, 16), r(32, 16), r(16, 32)], r(4, 16),
                      0.0),
    }
    inp, out, s0 = cases[op]
    return inp, torch.empty_like(out), [s0, 0.0, 0.0, 0.0]


def check(name, dt):
    op = "rotary_embedding" if name == "rotary_half" else name
    inp, out, scalar = case(name, dt)
    eager = importlib.import_module("torch_ref." + op)
    compiled = importlib.import_module("torch_ref.compiled." + op)
    r = eager.ak_kernel(Args(inp, [out], scalar))
    if r is not None:
        out.copy_(r)
    got = compiled.ak_kernel(Args(inp, [None], scalar))
    if got.dtype != out.dtype or got.shape != out.shape:
        return "%s %s: op() gives %s %s, the output is %s %s" % (
            name, dt, got.dtype, list(got.shape), out.dtype,
            list(out.shape))
    tol = 1e-5 if dt == torch.float32 else 2e-2
    err = float((got.float() - out.float()).abs().max())
    if not err <= tol * (1 + float(out.float().abs().max())):
        return "%s %s: op() and ak_kernel() differ by %g" % (name, dt, err)
    return None


bad = []
for name in ["softmax", "reduce", "layernorm", "rmsnorm", "cross_entropy",
             "matmul", "rotary_embedding", "rotary_half", "flash_attention",
             "fused_mlp"]:
    for dt in (torch.float32, torch.bfloat16):
        why = check(name, dt)
        print(why or "ok %s %s" % (name, dt))
        if why:
            bad.append(why)
sys.exit(1 if bad else 0)
