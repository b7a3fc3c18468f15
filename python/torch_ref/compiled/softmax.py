"""
softmax through torch.compile: the op() of
torch_ref/softmax.py, compiled (torch_ref.compile_kernel(); importing
this raises where torch.compile is not timed).
"""
import torch_ref
from torch_ref.softmax import op

ak_kernel = torch_ref.compile_kernel(op)
