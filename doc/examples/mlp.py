"""A plain PyTorch MLP classifier on the CPU, for `git autokernel e2e`.

    git autokernel e2e -- python3 doc/examples/mlp.py [BATCH]

Two hidden layers of 256 with LayerNorm and GELU, and a softmax over 10
classes: with a host layernorm kernel verified at rows of 256 (C=256), its
two LayerNorms go to the kernel; a softmax kernel takes the last softmax
only if it was verified at C=10, else that call falls back to PyTorch.
"""
import torch
from torch import nn

D_IN, HIDDEN, CLASSES = 64, 256, 10


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(D_IN, HIDDEN)
        self.norm1 = nn.LayerNorm(HIDDEN)
        self.fc2 = nn.Linear(HIDDEN, HIDDEN)
        self.norm2 = nn.LayerNorm(HIDDEN)
        self.head = nn.Linear(HIDDEN, CLASSES)
        self.act = nn.GELU()
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, x):
        h = self.act(self.norm1(self.fc1(x)))
        h = self.act(self.norm2(self.fc2(h)))
        return self.softmax(self.head(h))


def autokernel_model(args):
    """(model, inputs): random weights and a batch of BATCH (default 64)."""
    torch.manual_seed(0)
    batch = int(args[0]) if args else 64
    model = MLP().eval()
    with torch.no_grad():
        # LayerNorm starts at w=1, b=0: make its affine part count
        for norm in (model.norm1, model.norm2):
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.uniform_(-0.5, 0.5)
    return model, (torch.randn(batch, D_IN),)
