"""rotary_embedding through torch.compile: torch_ref/rotary_embedding.py's op(), compiled."""
import torch_ref
from torch_ref.rotary_embedding import op

ak_kernel = torch_ref.compiled(op)
