"""reduce through torch.compile: torch_ref/reduce.py's op(), compiled."""
import torch_ref
from torch_ref.reduce import op

ak_kernel = torch_ref.compiled(op)
