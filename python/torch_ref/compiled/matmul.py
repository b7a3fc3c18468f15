"""matmul through torch.compile: torch_ref/matmul.py's op(), compiled."""
import torch_ref
from torch_ref.matmul import op

ak_kernel = torch_ref.compiled(op)
