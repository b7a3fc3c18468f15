"""rmsnorm through torch.compile: torch_ref/rmsnorm.py's op(), compiled."""
import torch_ref
from torch_ref.rmsnorm import op

ak_kernel = torch_ref.compiled(op)
