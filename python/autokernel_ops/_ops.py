"""The nine ops' contracts (doc/ops.md) on the torch side.

Each op says how a call's tensors map to the op's shape (its named
dimensions, as in problem.json), which of those dimensions a kernel
specializes on (`fixed`: they must be among the verified shapes; the others
are free), the dense tensors the kernel is given, and the PyTorch code of
the same semantics that a call falls back to.  A fallback computes in f32
and rounds once to the output dtype, as the contract says a kernel does.
"""
import torch
import torch.nn.functional as F

# patch() may replace F.cross_entropy: a fallback calls the original
_cross_entropy = F.cross_entropy


class Unsupported(Exception):
    """Why a call cannot go to the kernel; the fallback's reason."""


def _rows(x):
    """x[..., C] as the op's R x C."""
    if x.dim() < 1 or x.numel() == 0:
        raise Unsupported("an empty or 0-d tensor")
    return x.numel() // x.shape[-1], x.shape[-1]


def _need(ok, why):
    if not ok:
        raise Unsupported(why)


class Op:
    name = dims = schema = None
    fixed = ()          # indices into dims that must be verified; None: all

    def shape(self, *args):
        """The op's shape of a call, or Unsupported."""
        raise NotImplementedError

    def output(self, *args):
        """(shape, dtype) of the value the op returns."""
        return args[0].shape, args[0].dtype

    def abi(self, y, *args):
        """(inputs, outputs, scalars) as the kernel takes them, the
        outputs being views of y."""
        raise NotImplementedError

    def check(self, *args):
        """Checks of the data itself, after the guard's (may sync)."""

    def fallback(self, *args):
        raise NotImplementedError

    def meta(self, *args):
        shape, dtype = self.output(*args)
        return args[0].new_empty(shape, dtype=dtype)


class Softmax(Op):
    name, dims, fixed = "softmax", "R,C", (1,)
    schema = "(Tensor x) -> Tensor"

    def shape(self, x):
        return _rows(x)

    def abi(self, y, x):
        rc = _rows(x)
        return [x.view(rc)], [y.view(rc)], [0.0] * 4

    def fallback(self, x):
        return torch.softmax(x.float(), -1).to(x.dtype)


class LayerNorm(Op):
    name, dims, fixed = "layernorm", "R,C", (1,)
    schema = "(Tensor x, Tensor w, Tensor b, float eps=1e-05) -> Tensor"

    def shape(self, x, w, b, eps=1e-5):
        r, c = _rows(x)
        _need(w.shape == (c,) and b.shape == (c,), "w and b are not [C]")
        return r, c

    def abi(self, y, x, w, b, eps=1e-5):
        rc = _rows(x)
        return [x.view(rc), w, b], [y.view(rc)], [eps, 0.0, 0.0, 0.0]

    def fallback(self, x, w, b, eps=1e-5):
        return F.layer_norm(x.float(), (x.shape[-1],), w.float(), b.float(),
                            eps).to(x.dtype)


class RMSNorm(Op):
    name, dims, fixed = "rmsnorm", "R,C", (1,)
    schema = "(Tensor x, Tensor w, float eps=1e-06) -> Tensor"

    def shape(self, x, w, eps=1e-6):
        r, c = _rows(x)
        _need(w.shape == (c,), "w is not [C]")
        return r, c

    def abi(self, y, x, w, eps=1e-6):
        rc = _rows(x)
        return [x.view(rc), w], [y.view(rc)], [eps, 0.0, 0.0, 0.0]

    def fallback(self, x, w, eps=1e-6):
        xf = x.float()
        rms = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
        return (xf * rms * w.float()).to(x.dtype)


class Reduce(Op):
    name, dims, fixed = "reduce", "R,C", (1,)
    schema = "(Tensor x) -> Tensor"

    def shape(self, x):
        return _rows(x)

    def output(self, x):
        return x.shape[:-1], x.dtype

    def abi(self, y, x):
        r, c = _rows(x)
        return [x.view(r, c)], [y.view(r)], [0.0] * 4

    def fallback(self, x):
        return x.float().sum(-1).to(x.dtype)


class CrossEntropy(Op):
    name, dims, fixed = "cross_entropy", "N,V", (1,)
    schema = "(Tensor logits, Tensor target) -> Tensor"

    def shape(self, logits, target):
        _need(logits.dim() == 2 and logits.numel() > 0,
              "logits are not [N,V]")
        _need(target.shape == logits.shape[:1], "target is not [N]")
        _need(target.dtype == torch.int64, "target is not int64")
        return tuple(logits.shape)

    def output(self, logits, target):
        return (), torch.float32

    def abi(self, y, logits, target):
        return [logits, target], [y], [0.0] * 4

    def check(self, logits, target):
        bad = (target < 0) | (target >= logits.shape[1])
        _need(not bool(bad.any()), "a target outside [0, V)")

    def fallback(self, logits, target):
        return _cross_entropy(logits.float(), target)


class Rotary(Op):
    name, dims, fixed = "rotary_embedding", "B,H,S,D", (3,)
    schema = "(Tensor x, Tensor cos, Tensor sin) -> Tensor"

    def shape(self, x, cos, sin):
        _need(x.dim() == 4 and x.numel() > 0, "x is not [B,H,S,D]")
        _need(x.shape[3] % 2 == 0, "D is odd")
        half = (x.shape[2], x.shape[3] // 2)
        _need(cos.shape == half and sin.shape == half,
              "cos and sin are not [S,D/2]")
        return tuple(x.shape)

    def abi(self, y, x, cos, sin):
        return [x, cos, sin], [y], [0.0] * 4

    def fallback(self, x, cos, sin):
        xf, c, s = x.float(), cos.float(), sin.float()
        a, b = xf[..., 0::2], xf[..., 1::2]
        y = torch.stack((a * c - b * s, a * s + b * c), -1)
        return y.flatten(-2).to(x.dtype)


class Attention(Op):
    name, dims, fixed = "flash_attention", "B,H,S,D", (3,)
    schema = "(Tensor q, Tensor k, Tensor v, float? scale=None) -> Tensor"

    def shape(self, q, k, v, scale=None):
        _need(q.dim() == 4 and q.numel() > 0, "q is not [B,H,S,D]")
        _need(k.shape == q.shape and v.shape == q.shape,
              "k and v are not the shape of q")
        d = q.shape[3] ** -0.5
        _need(scale is None or abs(scale - d) <= 1e-6 * d,
              "the scale is not D^-0.5, the one verified")
        return tuple(q.shape)

    def abi(self, y, q, k, v, scale=None):
        return [q, k, v], [y], [q.shape[3] ** -0.5, 0.0, 0.0, 0.0]

    def fallback(self, q, k, v, scale=None):
        s = q.shape[2]
        scores = q.float() @ k.float().transpose(-1, -2)
        scores = scores * (q.shape[3] ** -0.5 if scale is None else scale)
        above = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
        p = torch.softmax(scores.masked_fill(above, float("-inf")), -1)
        return (p @ v.float()).to(q.dtype)


class FusedMLP(Op):
    name, dims, fixed = "fused_mlp", "T,D,F", None
    schema = "(Tensor x, Tensor w_gate, Tensor w_up, Tensor w_down) -> Tensor"

    def shape(self, x, w_gate, w_up, w_down):
        t, d = _rows(x)
        f = w_gate.shape[0]
        _need(w_gate.shape == (f, d) and w_up.shape == (f, d) and
              w_down.shape == (d, f), "the weights are not [F,D], [F,D], "
              "[D,F]")
        return t, d, f

    def abi(self, y, x, w_gate, w_up, w_down):
        td = _rows(x)
        return [x.view(td), w_gate, w_up, w_down], [y.view(td)], [0.0] * 4

    def fallback(self, x, w_gate, w_up, w_down):
        xf = x.float()
        h = F.silu(xf @ w_gate.float().t()) * (xf @ w_up.float().t())
        return (h @ w_down.float().t()).to(x.dtype)


class Matmul(Op):
    name, dims, fixed = "matmul", "M,N,K", None
    schema = "(Tensor a, Tensor b) -> Tensor"

    def shape(self, a, b):
        _need(a.dim() == 2 and b.dim() == 2 and a.shape[1] == b.shape[0],
              "a and b are not [M,K] and [K,N]")
        return a.shape[0], b.shape[1], a.shape[1]

    def output(self, a, b):
        return (a.shape[0], b.shape[1]), a.dtype

    def abi(self, y, a, b):
        return [a, b], [y], [0.0] * 4

    def fallback(self, a, b):
        return (a.float() @ b.float()).to(a.dtype)


OPS = {op.name: op for op in (Matmul(), Softmax(), LayerNorm(), RMSNorm(),
                               CrossEntropy(), Reduce(), Rotary(),
                               Attention(), FusedMLP())}
