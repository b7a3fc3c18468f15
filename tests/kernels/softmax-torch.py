"""softmax in plain torch: a kernel for the fake device of the triton
backend's tests (CPU, no Triton).  The tests replace the BREAK line."""
import torch


def ak_kernel(a):
    x, = a.inp
    y, = a.out
    y.copy_(torch.softmax(x.float(), dim=-1))
    # BREAK
