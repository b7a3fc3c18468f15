"""
rotary_embedding through torch.compile: the op() of
torch_ref/rotary_embedding.py, compiled (torch_ref.compile_kernel(); importing
this raises where torch.compile is not timed).
"""
import torch_ref
from torch_ref.rotary_embedding import op

ak_kernel = torch_ref.compile_kernel(op)
