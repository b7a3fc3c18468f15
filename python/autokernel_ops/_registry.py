"""The exported kernels as torch.ops.autokernel.<name>.

Each kernel of manifest.json becomes one operator of the op's schema with
the same implementation for the CPU and CUDA dispatch keys, and a Meta one
(shapes and dtypes only) for FakeTensor tracing.  The implementation runs
the kernel when the guard lets it, else the op's PyTorch fallback, and
counts the call either way.
"""
import collections
import contextlib
import json
import os
import warnings

import torch

from . import _abi, _build
from ._ops import OPS, Unsupported

PKG = os.path.dirname(os.path.abspath(__file__))
# the torch device type of a backend's tensors
DEVICE = {"host": "cpu", "cuda": "cuda", "hip": "cuda"}

# torch 1.x has no fallthrough for AutogradMeta: plain meta tensors (not
# FakeTensorMode's, which works) need a kernel there of their own
OLD_TORCH = int(torch.__version__.split(".")[0]) < 2

_counts = collections.Counter()
_paused = [0]
_library = []           # the torch.library.Library (freed, it unregisters)
exported = []           # Exported, in the manifest's order


def _dims(text):
    return tuple(int(d) for d in text.split("x"))


def _fmt(dims):
    return "x".join(str(d) for d in dims)


def verified_shapes(kernel):
    """Every shape the kernel was verified at, as tuples of the op's dims."""
    s = kernel["shapes"]
    texts = [s["smoke"], s["bench"]] + s["test"] + s["edge"] + \
        s.get("workload", [])
    return sorted(set(_dims(t) for t in texts))


class Exported:
    """One exported kernel: its manifest entry, guard and implementation."""

    def __init__(self, kernel):
        self.kernel = kernel
        self.name = kernel["torch_name"]
        self.op = OPS[kernel["op"]]
        self.device = DEVICE[kernel["backend"]]
        self.dtypes = [_abi.NAMES[d] for d in kernel["dtypes"]]
        self.shapes = verified_shapes(kernel)
        self.fn = None          # torch.ops.autokernel.<name>, once defined
        self._loaded = None     # the _abi.Kernel, loaded at the first call
        self._why = None        # or why there is none

    def unavailable(self):
        """None once the kernel is loaded for this device, else why it
        cannot be (warned once)."""
        if self._loaded is None and self._why is None:
            try:
                path = _build.object_for_device(PKG, self.kernel)
                self._loaded = _abi.Kernel(path)
            except (_build.BuildError, OSError) as e:
                self._why = str(e)
                warnings.warn("autokernel_ops: %s falls back to PyTorch: %s"
                              % (self.name, e), stacklevel=3)
        return self._why

    def refuse(self, args):
        """None if the kernel may take this call, else the reason."""
        try:
            return self._guard(args)
        except Unsupported as e:
            return str(e)

    def _guard(self, args):
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        x = tensors[0]
        if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
            return "autograd: the kernel has no backward"
        for t in tensors:
            if t.device != x.device or t.device.type != self.device:
                return "on %s, the kernel runs on %s" % (t.device,
                                                          self.device)
            if not t.is_contiguous():
                return "a non-contiguous tensor"
            if t.is_floating_point() and t.dtype != x.dtype:
                return "mixed dtypes %s and %s" % (_abi.dtype_name(x.dtype),
                                                   _abi.dtype_name(t.dtype))
        if x.dtype not in self.dtypes:
            return "%s not verified (%s)" % (
                _abi.dtype_name(x.dtype), ", ".join(self.kernel["dtypes"]))
        why = self._unverified(self.op.shape(*args))
        if why is None:
            self.op.check(*args)
        return why

    def _unverified(self, shape):
        fixed = self.op.fixed
        if fixed is None:
            if shape in self.shapes:
                return None
            return "%s not among the verified shapes (%s)" % (
                _fmt(shape), ", ".join(_fmt(s) for s in self.shapes))
        seen = sorted(set(tuple(s[i] for i in fixed) for s in self.shapes))
        if tuple(shape[i] for i in fixed) in seen:
            return None
        names = "x".join(self.op.dims.split(",")[i] for i in fixed)
        return "%s: %s=%s not verified (%s in %s)" % (
            _fmt(shape), names, _fmt(shape[i] for i in fixed), names,
            ", ".join(_fmt(v) for v in seen))

    def shape_of(self, args):
        """The call's shape in the op's dims, else its first tensor's."""
        try:
            return _fmt(self.op.shape(*args))
        except Unsupported:
            return _fmt(args[0].shape)

    def count(self, args, path, reason=""):
        key = (self.name, self.op.name, self.shape_of(args),
               _abi.dtype_name(args[0].dtype), path, reason)
        _counts[key] += 1

    def __call__(self, *args):
        """The operator's implementation for CPU and CUDA tensors."""
        why = self.refuse(args) or self.unavailable()
        if why is None:
            shape, dtype = self.op.output(*args)
            y = torch.empty(shape, dtype=dtype, device=args[0].device)
            ins, outs, scalars = self.op.abi(y, *args)
            rc = self._loaded(ins, outs, scalars)
            if rc == 0:
                self.count(args, "kernel")
                return y
            why = "ak_kernel returned %d" % rc
        self.count(args, "fallback", why)
        return self.op.fallback(*args)


def _manifest():
    with open(os.path.join(PKG, "manifest.json")) as f:
        m = json.load(f)
    if m.get("abi") != _abi.ABI_VERSION:
        raise ImportError("autokernel_ops: the kernels are of ABI %s, this "
                          "package speaks %d" % (m.get("abi"),
                                                 _abi.ABI_VERSION))
    return m


def register():
    """Defines torch.ops.autokernel.* for the manifest's kernels."""
    try:
        lib = torch.library.Library("autokernel", "DEF")
    except RuntimeError as e:
        raise ImportError("autokernel_ops: torch.ops.autokernel is defined "
                          "already in this process (another autokernel_ops "
                          "imported?): %s" % e)
    _library.append(lib)
    for kernel in _manifest()["kernels"]:
        e = Exported(kernel)
        if any(x.name == e.name for x in exported):
            warnings.warn("autokernel_ops: two kernels named %s; the first "
                          "is used" % e.name)
            continue
        lib.define(e.name + e.op.schema)
        for key in ("CPU", "CUDA"):
            lib.impl(e.name, e, key)
        lib.impl(e.name, e.op.meta, "Meta")
        if OLD_TORCH:
            lib.impl(e.name, e.op.meta, "AutogradMeta")
        e.fn = getattr(torch.ops.autokernel, e.name)
        exported.append(e)


def for_op(op):
    """The first exported kernel of an op, or None."""
    return next((e for e in exported if e.op.name == op), None)


def kernels():
    """The manifest's entries of the registered kernels."""
    return [dict(e.kernel, registered_as="torch.ops.autokernel." + e.name)
            for e in exported]


def stats():
    """Every call so far: dicts of name, op, shape, dtype, path (kernel or
    fallback), reason (why it fell back) and calls, most calls first."""
    keys = ("name", "op", "shape", "dtype", "path", "reason")
    rows = [dict(zip(keys, k), calls=n) for k, n in _counts.items()]
    return sorted(rows, key=lambda r: (-r["calls"], r["name"], r["shape"]))


def reset_stats():
    _counts.clear()


@contextlib.contextmanager
def paused():
    """Within it, what patch() swapped runs as before, uncounted."""
    _paused[0] += 1
    try:
        yield
    finally:
        _paused[0] -= 1


def is_paused():
    return _paused[0] > 0
