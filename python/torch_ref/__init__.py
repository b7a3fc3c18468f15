"""
torch_ref: PyTorch's own implementation of each op of ops/ops.c, the
reference that `git autokernel bench --torch` times beside a kernel.

Each <op>.py is a kernel module of the Python runner (doc/triton.md),
loaded into a slot of its own runner started with AK_RUNNER_REFERENCE=1,
so every rule of the harness holds for PyTorch as for the kernel: fresh
inputs for every timed call, the L2 flushed, every output checked.  A
module defines

    op(inp, scalar)     the op in PyTorch eager, exactly as the ABI defines
                        it (the inputs of ops/ops.c, its scalars, outputs
                        of its dtype), returning the output tensor;
    ak_kernel(a)        what is timed: writes a.out with an out= variant
                        where PyTorch has one, else returns op()'s tensor,
                        which the runner copies into a.out after the timed
                        interval (so PyTorch is not charged a copy its
                        users never make).

compiled/<op>.py is the same op() through torch.compile, where it works
(compile_unavailable() says why not).
"""
import os

import torch


def version():
    """torch's (major, minor): (2, 5) for "2.5.1+cu124"."""
    parts = torch.__version__.split(".")
    return int(parts[0]), int("".join(c for c in parts[1] if c.isdigit()))


def compile_unavailable():
    """Why torch.compile is not timed here, or None where it is: torch 2
    on a CUDA device, with Triton (Inductor's code generator), unless
    AUTOKERNEL_TORCH_COMPILE=0 says to leave it out (its first call at each
    shape and dtype compiles a graph: minutes over a long list of shapes)."""
    if os.environ.get("AUTOKERNEL_TORCH_COMPILE", "1") == "0":
        return "AUTOKERNEL_TORCH_COMPILE=0 in the environment"
    if not hasattr(torch, "compile"):
        return "torch %s has no torch.compile (torch 2.0 and later)" % \
            torch.__version__
    if os.environ.get("AUTOKERNEL_TRITON_DEVICE", "cuda") != "cuda":
        return "torch.compile is timed on a CUDA device only (this is " \
            "the runner's fake device, the CPU)"
    try:
        import triton   # noqa: F401
    except ImportError as e:
        return "torch.compile needs triton on a GPU: %s" % e
    return None


def compile_kernel(op):
    """ak_kernel(a) of op() through torch.compile (default mode, static
    shapes: a graph compiled for each shape, as a model's fixed shapes
    get).  Raises where torch.compile is not timed."""
    why = compile_unavailable()
    if why:
        raise RuntimeError(why)
    import torch._dynamo
    cfg = torch._dynamo.config
    # one graph per shape and dtype of --all-shapes, none falling back
    cfg.cache_size_limit = max(cfg.cache_size_limit, 64)
    if hasattr(cfg, "accumulated_cache_size_limit"):
        cfg.accumulated_cache_size_limit = max(
            cfg.accumulated_cache_size_limit, 512)
    fn = torch.compile(op, dynamic=False)

    def ak_kernel(a):
        return fn(tuple(a.inp), tuple(a.scalar))
    return ak_kernel
