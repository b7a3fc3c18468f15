"""flash_attention through torch.compile: torch_ref/flash_attention.py's op(), compiled."""
import torch_ref
from torch_ref.flash_attention import op

ak_kernel = torch_ref.compiled(op)
