"""cross_entropy through torch.compile: torch_ref/cross_entropy.py's op(), compiled."""
import torch_ref
from torch_ref.cross_entropy import op

ak_kernel = torch_ref.compiled(op)
