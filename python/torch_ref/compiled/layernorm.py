"""layernorm through torch.compile: torch_ref/layernorm.py's op(), compiled."""
import torch_ref
from torch_ref.layernorm import op

ak_kernel = torch_ref.compiled(op)
