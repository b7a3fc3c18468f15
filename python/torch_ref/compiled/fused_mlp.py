"""
fused_mlp through torch.compile: the op() of
torch_ref/fused_mlp.py, compiled (torch_ref.compile_kernel(); importing
this raises where torch.compile is not timed).
"""
import torch_ref
from torch_ref.fused_mlp import op

ak_kernel = torch_ref.compile_kernel(op)
