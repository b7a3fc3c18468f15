"""fused_mlp through torch.compile: torch_ref/fused_mlp.py's op(), compiled."""
import torch_ref
from torch_ref.fused_mlp import op

ak_kernel = torch_ref.compiled(op)
