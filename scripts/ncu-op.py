#!/usr/bin/env python3
"""scripts/ncu-op.py OP SHAPE DTYPE [--src FILE] [--torch] [--calls N]
[--backend cuda|host]: one op at one shape and dtype, driven from Python
for a profiler: the kernel (FILE, default kernels/<backend>/<op>.<ext>,
built here with the flags the tool uses) called through the ABI of
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
import os
import subprocess
import sys
import tempfile

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(SRC, "python"))

import torch  # noqa: E402


def package_module(name):
    """python/autokernel_ops/<name>.py alone: the ABI through ctypes and
    the build flags that export's package has, without the package's
    __init__ (which registers exported kernels as torch ops)."""
    path = os.path.join(SRC, "python", "autokernel_ops", name + ".py")
    spec = importlib.util.spec_from_file_location("ak_ncu" + name, path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


abi = package_module("_abi")
arch_flags = package_module("_build").arch_flags


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


def compiler(backend):
    """The compiler the tool would take (lib/toolchain.c)."""
    if backend == "host":
        return os.environ.get("AUTOKERNEL_CC") or "cc"
    if os.environ.get("AUTOKERNEL_NVCC"):
        return os.environ["AUTOKERNEL_NVCC"]
    nvcc = os.path.join(os.environ.get("CUDA_HOME") or "/usr/local/cuda",
                        "bin", "nvcc")
    return nvcc if os.path.exists(nvcc) else "nvcc"


def build(src, backend):
    """The kernel's shared object, built as the tool builds it
    (backends/build.c; sm_90a, for Hopper)."""
    so = os.path.join(tempfile.mkdtemp(prefix="ak-ncu-"), "kernel.so")
    inc = "-I" + os.path.join(SRC, "include")
    if backend == "cuda":
        cmd = [compiler(backend), "-O1", "-lineinfo", "-shared",
               "-Xcompiler", "-fPIC"] + arch_flags(backend, "sm_90") + \
              [inc, "-o", so, src]
    else:
        cmd = [compiler(backend), "-std=gnu11", "-O3", "-fopenmp",
               "-shared", "-fPIC", inc, "-o", so, src, "-lm"]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True)
    if r.returncode:
        raise SystemExit("build failed: %s\n%s" % (" ".join(cmd), r.stdout))
    return so


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
    kernel = abi.Kernel(build(src, o.backend))
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
