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
import ctypes
import os
import subprocess
import sys
import tempfile

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(SRC, "python"))

import torch  # noqa: E402

AK = {"f16": 0, "bf16": 1, "f32": 2, "f64": 3, "i32": 4, "i64": 5}
TORCH = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int),
                ("ndim", ctypes.c_int), ("shape", ctypes.c_int64 * 4),
                ("stride", ctypes.c_int64 * 4)]


class Args(ctypes.Structure):
    _fields_ = [("n_in", ctypes.c_int), ("n_out", ctypes.c_int),
                ("inp", ctypes.POINTER(Tensor)),
                ("out", ctypes.POINTER(Tensor)),
                ("scalar", ctypes.c_double * 4), ("stream", ctypes.c_void_p),
                ("workspace", ctypes.c_void_p),
                ("workspace_size", ctypes.c_size_t)]


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
    return t.to(TORCH[dt]).to(device)


def tensor(t, dt):
    s = Tensor()
    s.data = t.data_ptr()
    s.dtype = AK["i64" if t.dtype == torch.int64 else
                  "f32" if t.dtype == torch.float32 else dt]
    s.ndim = t.dim()
    for i in range(t.dim()):
        s.shape[i] = t.shape[i]
        s.stride[i] = t.stride(i)
    return s


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
               "-Xcompiler", "-fPIC",
               "-gencode=arch=compute_90a,code=sm_90a", inc, "-o", so, src]
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
    ap.add_argument("dtype", choices=sorted(TORCH))
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
    lib = ctypes.CDLL(build(src, o.backend))
    lib.ak_kernel.argtypes = [ctypes.POINTER(Args)]
    ws_fn = getattr(lib, "ak_workspace_size", None)
    if ws_fn is not None:
        ws_fn.argtypes = [ctypes.POINTER(Args)]
        ws_fn.restype = ctypes.c_size_t
    ref = None
    if o.torch:
        import importlib
        ref = importlib.import_module("torch_ref." + o.op)
    stream = torch.cuda.current_stream().cuda_stream if cuda else None
    nvtx = torch.cuda.nvtx if cuda else None
    g = torch.Generator().manual_seed(1)
    keep = []

    def call_kernel(inp):
        out = [torch.empty(s, dtype=TORCH[d or o.dtype], device=device)
               for s, d in outs]
        tin = (Tensor * len(inp))(*[tensor(t, o.dtype) for t in inp])
        tout = (Tensor * len(out))(*[tensor(t, o.dtype) for t in out])
        a = Args(len(inp), len(out), tin, tout, (ctypes.c_double * 4)(*scalar),
                 stream, None, 0)
        n = ws_fn(ctypes.byref(a)) if ws_fn is not None else 0
        ws = torch.empty(max(n, 1), dtype=torch.uint8, device=device)
        a.workspace, a.workspace_size = ws.data_ptr(), n
        keep.append((tin, tout, ws))
        rc = lib.ak_kernel(ctypes.byref(a))
        if rc:
            raise SystemExit("ak_kernel returned %d" % rc)
        return out[0]

    for i in range(o.calls + 1):
        inp = [make(s, k, o.dtype, device, g) for s, k in ins]
        if cuda:
            torch.cuda.synchronize()
        if nvtx and i:
            nvtx.range_push("ak_kernel")
        y = call_kernel(inp)
        if cuda:
            torch.cuda.synchronize()
        if nvtx and i:
            nvtx.range_pop()
        if ref is None:
            continue
        if nvtx and i:
            nvtx.range_push("ak_torch")
        r = ref.op(inp, scalar)
        if cuda:
            torch.cuda.synchronize()
        if nvtx and i:
            nvtx.range_pop()
        d = (y.double() - r.double()).abs().max().item()
        print("call %d: kernel against PyTorch, largest difference %.3g" % (i, d))
    print("%s %s %s: %d calls of the kernel%s, after one outside the ranges"
          % (o.op, o.shape, o.dtype, o.calls, " and of PyTorch's op" if ref else ""))


if __name__ == "__main__":
    main()
