"""softmax through torch.compile: torch_ref/softmax.py's op(), compiled."""
import torch_ref
from torch_ref.softmax import op

ak_kernel = torch_ref.compiled(op)
