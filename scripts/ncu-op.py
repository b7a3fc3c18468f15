#!/usr/bin/env python3
"""scripts/ncu-op.py OP SHAPE DTYPE [--src FILE] [--torch] [--calls N]
[--backend cuda|host]: one op at one shape and dtype, driven from Python
for a profiler: the kernel (FILE, default kernels/<backend>/<op>.<ext>,
built by the tool: verify --build-only) called through the ABI of
include/autokernel.h, and with --torch PyTorch's own op
(python/torch_ref/<op>.py, as `bench --torch` times it), each N times
(default 2) on fresh random inputs, each call inside an NVTX push/pop
range "ak_kernel" or "ak_torch", after one warm-up call outside them:

  ncu --clock-control none --nvtx --nvtx-include "ak_kernel/" \\
      --nvtx-include "ak_torch/" --set detailed \\
      python3 scripts/ncu-op.py flash_attention 8x32x512x128 f16 --torch

It is not a benchmark (the harness is: fresh inputs, the L2 flushed,
every call checked; scripts/real-shapes.sh): it exists so that ncu sees
the kernel and PyTorch's kernels side by side without the runner, whose
own CUPTI use a profiler collides with.  It prints each side's largest
difference from the other (--torch) as a sanity check, not a verdict.
With --backend host the kernel is the host starter, on the CPU (how the
tests run this script).
"""
import argparse
import importlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(SRC, "python"))

import torch  # noqa: E402


def package_module(name):
    """python/autokernel_ops/<name>.py alone (the ABI through ctypes),
    without the package's __init__ (which registers exported kernels as
    torch ops)."""
    path = os.path.join(SRC, "python", "autokernel_ops", name + ".py")
    spec = importlib.util.spec_from_file_location("ak_ncu" + name, path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


abi = package_module("_abi")


def layout(op, dims):
    """The op's inputs ([shape, kind]), outputs ([shape, dtype or None for
    the inputs'], and scalars, as `git autokernel ops OP` states them."""
    if op == "matmul":
        M, N, K = dims
        return [[[M, K], "x"], [[K, N], "x"]], [[[M, N], None]], [0.0]
    if op in ("softmax", "reduce"):
        R, C = dims
        return [[[R, C], "x"]], [[[R] if op == "reduce" else [R, C], None]], [0.0]
    if op == "layernorm":
        R, C = dims
        return ([[[R, C], "x"], [[C], "w"], [[C], "b"]], [[[R, C], None]],
                [1e-5])
    if op == "rmsnorm":
        R, C = dims
        return [[[R, C], "x"], [[C], "w"]], [[[R, C], None]], [1e-6]
    if op == "cross_entropy":
        N, V = dims
        return [[[N, V], "x"], [[N], ("target", V)]], [[[], "f32"]], [0.0]
    if op == "rotary_embedding":
        B, H, S, D = dims
        return ([[[B, H, S, D], "x"], [[S, D // 2], "cos"], [[S, D // 2], "sin"]],
                [[[B, H, S, D], None]], [0.0])
    if op == "flash_attention":
        B, H, S, D = dims
        return ([[[B, H, S, D], "x"]] * 3, [[[B, H, S, D], None]],
                [D ** -0.5])
    if op == "fused_mlp":
        T, D, F = dims
        return ([[[T, D], "x"], [[F, D], ("w", D)], [[F, D], ("w", D)],
                 [[D, F], ("w", F)]], [[[T, D], None]], [0.0])
    raise SystemExit("unknown op %r" % op)


def make(shape, kind, dt, device, g):
    """A fresh input: normal x, w near 1, b near 0, angles' cos and sin,
    weights of about 1/sqrt(fan-in), targets in [0, V)."""
    if isinstance(kind, tuple) and kind[0] == "target":
        return torch.randint(0, kind[1], shape, generator=g).to(device)
    t = torch.randn(shape, generator=g, dtype=torch.float32)
    if kind == "w":
        t = 1 + 0.1 * t
    elif kind == "b":
        t = 0.1 * t
    elif kind == "cos":
        t = torch.cos(3 * t)
    elif kind == "sin":
        t = torch.sin(3 * t)
    elif isinstance(kind, tuple):
        t = t / kind[1] ** 0.5
    return t.to(abi.NAMES[dt]).to(device)


def build(src, op, shape, dt, backend):
    """The kernel's shared object, built by the tool itself (`git
    autokernel verify --build-only` on a kernel directory of its own: the
    tool's compiler, flags and cache), its path."""
    d = tempfile.mkdtemp(prefix="ak-ncu-")
    name = "kernel" + os.path.splitext(src)[1]
    shutil.copy(src, os.path.join(d, name))
    with open(os.path.join(d, "problem.json"), "w") as f:
        json.dump({"version": 1, "op": op, "backend": backend,
                   "kernel": name, "dtypes": [dt], "bench_shape": shape,
                   "smoke_shape": shape, "test_shapes": [shape],
                   "edge_shapes": [shape], "seed": 1}, f)
    r = subprocess.run(["git", "autokernel", "verify", "--build-only", d],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True)
    shutil.rmtree(d)
    # "built <name> (<label>) for <backend>: <object>[ (cached)]"
    last = (r.stdout.strip().splitlines() or [""])[-1]
    if r.returncode or not last.startswith("built "):
        raise SystemExit("build failed:\n%s" % r.stdout)
    so = last.split(": ", 1)[1]
    return so[:-len(" (cached)")] if so.endswith(" (cached)") else so


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("op")
    ap.add_argument("shape")
    ap.add_argument("dtype", choices=("bf16", "f16", "f32"))
    ap.add_argument("--src")
    ap.add_argument("--torch", action="store_true")
    ap.add_argument("--calls", type=int, default=2)
    ap.add_argument("--backend", choices=("cuda", "host"), default="cuda")
    o = ap.parse_args()
    dims = [int(d) for d in o.shape.split("x")]
    ins, outs, scalar = layout(o.op, dims)
    cuda = o.backend == "cuda"
    if cuda and not torch.cuda.is_available():
        raise SystemExit("no CUDA device (--backend host runs the host starter)")
    device = "cuda" if cuda else "cpu"
    src = o.src or os.path.join(SRC, "kernels", o.backend,
                                o.op + (".cu" if cuda else ".c"))
    kernel = abi.Kernel(build(src, o.op, o.shape, o.dtype, o.backend))
    ref = importlib.import_module("torch_ref." + o.op) if o.torch else None
    g = torch.Generator().manual_seed(1)

    def call_kernel(inp):
        out = [torch.empty(s, dtype=abi.NAMES[d or o.dtype], device=device)
               for s, d in outs]
        rc = kernel(inp, out, scalar)
        if rc:
            raise SystemExit("ak_kernel returned %d" % rc)
        return out[0]

    def ranged(name, fn, inp, mark):
        """fn(inp) to its end, inside the NVTX range name where mark."""
        if cuda:
            torch.cuda.synchronize()
            if mark:
                torch.cuda.nvtx.range_push(name)
        r = fn(inp)
        if cuda:
            torch.cuda.synchronize()
            if mark:
                torch.cuda.nvtx.range_pop()
        return r

    for i in range(o.calls + 1):
        inp = [make(s, k, o.dtype, device, g) for s, k in ins]
        y = ranged("ak_kernel", call_kernel, inp, i > 0)
        if ref is None:
            continue
        r = ranged("ak_torch", lambda x: ref.op(x, scalar), inp, i > 0)
        d = (y.double() - r.double()).abs().max().item()
        print("call %d: kernel against PyTorch, largest difference %.3g" % (i, d))
    print("%s %s %s: %d calls of the kernel%s, after one outside the ranges"
          % (o.op, o.shape, o.dtype, o.calls, " and of PyTorch's op" if ref else ""))


if __name__ == "__main__":
    main()
