"""
layernorm through torch.compile: the op() of
torch_ref/layernorm.py, compiled (torch_ref.compile_kernel(); importing
this raises where torch.compile is not timed).
"""
import torch_ref
from torch_ref.layernorm import op

ak_kernel = torch_ref.compile_kernel(op)
