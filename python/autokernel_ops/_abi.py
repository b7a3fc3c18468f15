"""The kernel ABI of include/autokernel.h, through ctypes.

A loaded kernel is called as the harness calls it: struct ak_args over
struct ak_tensor, built here from torch tensors (data_ptr, dtype, shape,
strides in elements), the stream, and a workspace of ak_workspace_size()
bytes allocated as a torch uint8 tensor on the tensors' device.
"""
import ctypes

import torch

ABI_VERSION = 1
MAX_DIMS = 4

# enum ak_dtype, in its order
DTYPES = {
    torch.float16: 0,
    torch.bfloat16: 1,
    torch.float32: 2,
    torch.float64: 3,
    torch.int32: 4,
    torch.int64: 5,
}
NAMES = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32,
         "f64": torch.float64, "i32": torch.int32, "i64": torch.int64}
SHORT = {v: k for k, v in NAMES.items()}


def dtype_name(dtype):
    """"f16", "bf16", ... for a torch dtype; str(dtype) for others."""
    return SHORT.get(dtype, str(dtype).replace("torch.", ""))


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p),
                ("dtype", ctypes.c_int),
                ("ndim", ctypes.c_int),
                ("shape", ctypes.c_int64 * MAX_DIMS),
                ("stride", ctypes.c_int64 * MAX_DIMS)]


class Args(ctypes.Structure):
    _fields_ = [("n_in", ctypes.c_int),
                ("n_out", ctypes.c_int),
                ("inputs", ctypes.POINTER(Tensor)),
                ("outputs", ctypes.POINTER(Tensor)),
                ("scalar", ctypes.c_double * 4),
                ("stream", ctypes.c_void_p),
                ("workspace", ctypes.c_void_p),
                ("workspace_size", ctypes.c_size_t)]


def ak_tensor(t):
    """A struct ak_tensor describing t (which must outlive the call)."""
    s = Tensor()
    s.data = t.data_ptr()
    s.dtype = DTYPES[t.dtype]
    s.ndim = t.dim()
    for i in range(t.dim()):
        s.shape[i] = t.shape[i]
        s.stride[i] = t.stride(i)
    return s


def _stream(device):
    if device.type != "cuda":
        return None
    return torch.cuda.current_stream(device).cuda_stream


class Kernel:
    """One built shared object: ak_kernel and the optional workspace size."""

    def __init__(self, path):
        self.path = path
        self.lib = ctypes.CDLL(path)
        self.entry = self.lib.ak_kernel
        self.entry.argtypes = [ctypes.POINTER(Args)]
        self.entry.restype = ctypes.c_int
        try:
            self.workspace_size = self.lib.ak_workspace_size
            self.workspace_size.argtypes = [ctypes.POINTER(Args)]
            self.workspace_size.restype = ctypes.c_size_t
        except AttributeError:
            self.workspace_size = None

    def __call__(self, inputs, outputs, scalars):
        """Runs the kernel on dense tensors; returns ak_kernel's status."""
        device = inputs[0].device
        if device.type == "cuda":
            with torch.cuda.device(device):
                return self._run(device, inputs, outputs, scalars)
        return self._run(device, inputs, outputs, scalars)

    def _run(self, device, inputs, outputs, scalars):
        ins = (Tensor * len(inputs))(*[ak_tensor(t) for t in inputs])
        outs = (Tensor * len(outputs))(*[ak_tensor(t) for t in outputs])
        args = Args(len(inputs), len(outputs), ins, outs,
                    (ctypes.c_double * 4)(*scalars), _stream(device), None, 0)
        workspace = None
        size = self.workspace_size(ctypes.byref(args)) \
            if self.workspace_size else 0
        if size:
            workspace = torch.empty(size, dtype=torch.uint8, device=device)
            args.workspace = workspace.data_ptr()
            args.workspace_size = size
        return self.entry(ctypes.byref(args))
