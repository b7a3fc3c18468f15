"""
cross_entropy through torch.compile: the op() of
torch_ref/cross_entropy.py, compiled (torch_ref.compile_kernel(); importing
this raises where torch.compile is not timed).
"""
import torch_ref
from torch_ref.cross_entropy import op

ak_kernel = torch_ref.compile_kernel(op)
