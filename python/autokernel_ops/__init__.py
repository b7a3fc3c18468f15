"""autokernel_ops: kernels of git-autokernel branches as torch.ops.autokernel.

Made by `git autokernel export`; doc/pytorch.md is the manual.

    import autokernel_ops
    y = torch.ops.autokernel.softmax(x)   # the kernel, or PyTorch if the
                                          # guard refuses the call
    replaced = autokernel_ops.patch(model)
    autokernel_ops.stats()                # calls by op, shape, dtype, path
    autokernel_ops.unpatch()

A call goes to the kernel when its dtype is one the kernel was verified
in, its tensors are dense row-major on the backend's device (cpu for host
kernels, cuda for cuda and hip), no input needs a gradient, and the
dimensions the kernel specializes on were verified: the row length C of
softmax, layernorm, rmsnorm and reduce, the vocabulary V of cross_entropy,
the head dim D of flash_attention and rotary_embedding, and the whole shape
of matmul and fused_mlp.  Any other call computes the same op in PyTorch.
"""
from ._patch import patch, unpatch
from ._registry import kernels, paused, reset_stats, stats
from . import _registry

_registry.register()

__all__ = ["kernels", "patch", "paused", "reset_stats", "stats", "unpatch"]
