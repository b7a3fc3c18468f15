"""patch(model): the model's modules and functions that compute an exported
op, swapped for its kernel; unpatch() puts them back.

Modules are matched by structure and patched in place (their forward is
overridden on the instance, so parameters, state_dict and hooks are
untouched); functions of torch.nn.functional are replaced process-wide
until unpatch().  A swapped call goes to the kernel only when its
arguments mean the op's semantics and the kernel's guard takes them;
otherwise it runs the original, so a call that falls back computes
exactly what the model computed before.  The rules (doc/pytorch.md):

  nn.LayerNorm, 1-d normalized_shape, weight and bias      layernorm
  *RMSNorm* with weight and variance_epsilon or eps         rmsnorm
  nn.Softmax, F.softmax over the last dim                   softmax
  nn.CrossEntropyLoss, F.cross_entropy: mean, no weight,    cross_entropy
    no label smoothing, ignore_index not among the targets
  F.scaled_dot_product_attention: is_causal, no mask,       flash_attention
    no dropout, scale None or D^-0.5 (q, k, v made dense)
  gate_proj, up_proj, down_proj (Linear, no bias), SiLU     fused_mlp
"""
import functools

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import _registry

_undo = []      # what restores each change, newest last

ROTARY_WHY = ("the exported rotary_embedding kernel rotates interleaved pairs "
              "(x[2i], x[2i+1]); this model's rotary is not known to use "
              "that layout (transformers' Llama rotates halves, rotate_half)")
NO_RULE = {
    "matmul": "patch() has no rule for matmul: nn.Linear computes x W^T "
              "and the op takes B[K,N]",
    "reduce": "patch() has no rule for reduce",
}


class Report(list):
    """What patch() replaced: dicts of path, kind, op and kernel.
    .skipped: what was not patched though its op was exported, and why."""

    def __init__(self):
        super().__init__()
        self.skipped = []


def _route(e, orig, args, kwargs, kernel_args, why=None, post=None):
    """The kernel on kernel_args if the call is the op's and the guard
    takes it, else orig(*args, **kwargs) with the package paused within;
    counted once either way."""
    if _registry.is_paused():
        return orig(*args, **kwargs)
    why = why or e.refuse(kernel_args) or e.unavailable()
    if why:
        e.count(kernel_args, "fallback", why)
        with _registry.paused():    # nn.Softmax's F.softmax: one call
            return orig(*args, **kwargs)
    out = e.fn(*kernel_args)
    return post(out) if post else out


def _bind(names, args, kwargs):
    bound = dict(zip(names, args))
    bound.update(kwargs)
    return bound


def _last_dim(x, dim):
    if dim is None or dim not in (-1, x.dim() - 1):
        return "dim=%s is not the last" % dim
    return None


def _ce_why(logits, target, ignore_index):
    if target.is_floating_point():
        return "the targets are probabilities"
    if target.dim() == 1 and bool((target == ignore_index).any()):
        return "ignore_index %d is among the targets" % ignore_index
    return None


# ---- modules: (op, match(module), make(kernel, module, orig forward)) ----

def _is_layernorm(m):
    return isinstance(m, nn.LayerNorm) and len(m.normalized_shape) == 1 \
        and m.weight is not None and m.bias is not None


def _layernorm(e, m, orig):
    def forward(x):
        return _route(e, orig, (x,), {}, (x, m.weight, m.bias, float(m.eps)))
    return forward


def _rms_eps(m):
    return getattr(m, "variance_epsilon", getattr(m, "eps", None))


def _is_rmsnorm(m):
    # Gemma's RMSNorm scales by (1 + weight): not the op
    name = type(m).__name__
    w = getattr(m, "weight", None)
    eps = _rms_eps(m)
    return "RMSNorm" in name and "Gemma" not in name and \
        isinstance(w, torch.Tensor) and w.dim() == 1 and \
        (eps is None or isinstance(eps, float))


def _rmsnorm(e, m, orig):
    def forward(x):
        eps = _rms_eps(m)
        eps = torch.finfo(x.dtype).eps if eps is None else eps
        return _route(e, orig, (x,), {}, (x, m.weight, float(eps)))
    return forward


def _is_softmax(m):
    return isinstance(m, nn.Softmax) and m.dim is not None


def _softmax(e, m, orig):
    def forward(x):
        return _route(e, orig, (x,), {}, (x,), why=_last_dim(x, m.dim))
    return forward


def _is_cross_entropy(m):
    return isinstance(m, nn.CrossEntropyLoss) and m.reduction == "mean" and \
        m.weight is None and getattr(m, "label_smoothing", 0.0) == 0.0


def _cross_entropy(e, m, orig):
    def forward(logits, target):
        return _route(e, orig, (logits, target), {}, (logits, target),
                      why=_ce_why(logits, target, m.ignore_index),
                      post=lambda y: y.to(logits.dtype))
    return forward


def _is_silu(act):
    return isinstance(act, nn.SiLU) or act is F.silu or \
        type(act).__name__ == "SiLUActivation"


def _is_swiglu(m):
    lin = [getattr(m, n, None) for n in ("gate_proj", "up_proj", "down_proj")]
    tp = getattr(getattr(m, "config", None), "pretraining_tp", 1)
    return all(isinstance(x, nn.Linear) and x.bias is None for x in lin) and \
        _is_silu(getattr(m, "act_fn", None)) and tp == 1


def _swiglu(e, m, orig):
    def forward(x):
        return _route(e, orig, (x,), {}, (x, m.gate_proj.weight,
                                          m.up_proj.weight,
                                          m.down_proj.weight))
    return forward


MODULE_RULES = [
    ("layernorm", _is_layernorm, _layernorm),
    ("rmsnorm", _is_rmsnorm, _rmsnorm),
    ("softmax", _is_softmax, _softmax),
    ("cross_entropy", _is_cross_entropy, _cross_entropy),
    ("fused_mlp", _is_swiglu, _swiglu),
]


# ---- functions of torch.nn.functional: (op, name, make(kernel, orig)) ----

def _f_softmax(e, orig):
    def softmax(*args, **kwargs):
        a = _bind(("input", "dim", "_stacklevel", "dtype"), args, kwargs)
        x = a["input"]
        why = _last_dim(x, a.get("dim"))
        if why is None and a.get("dtype") is not None:
            why = "a dtype= argument"
        return _route(e, orig, args, kwargs, (x,), why=why)
    return softmax


def _f_cross_entropy(e, orig):
    names = ("input", "target", "weight", "size_average", "ignore_index",
             "reduce", "reduction", "label_smoothing")

    def cross_entropy(*args, **kwargs):
        a = _bind(names, args, kwargs)
        logits, target = a["input"], a["target"]
        why = None
        if any(a.get(k) is not None for k in ("weight", "size_average",
                                               "reduce")) or \
                a.get("reduction", "mean") != "mean" or \
                a.get("label_smoothing", 0.0) != 0.0:
            why = "weights, a reduction other than mean or label smoothing"
        why = why or _ce_why(logits, target, a.get("ignore_index", -100))
        return _route(e, orig, args, kwargs, (logits, target), why=why,
                      post=lambda y: y.to(logits.dtype))
    return cross_entropy


def _f_sdpa(e, orig):
    names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal",
             "scale", "enable_gqa")

    def scaled_dot_product_attention(*args, **kwargs):
        a = _bind(names, args, kwargs)
        qkv = (a["query"], a["key"], a["value"])
        why = None
        if a.get("attn_mask") is not None or a.get("dropout_p", 0.0) != 0.0 \
                or not a.get("is_causal", False):
            why = "a mask, dropout or is_causal=False"
        else:
            # transformers passes [B,H,S,D] views of [B,S,H,D]: the copy
            # is the patched model's time; k and v of fewer heads than q
            # (GQA) are refused by the op's guard, enable_gqa or not
            qkv = tuple(t.contiguous() for t in qkv)
        return _route(e, orig, args, kwargs, qkv + (a.get("scale"),),
                      why=why)
    return scaled_dot_product_attention


FUNCTION_RULES = [
    ("softmax", "softmax", _f_softmax),
    ("cross_entropy", "cross_entropy", _f_cross_entropy),
    ("flash_attention", "scaled_dot_product_attention", _f_sdpa),
]


def _entry(path, kind, e):
    return {"path": path, "kind": kind, "op": e.op.name, "kernel": e.name}


def _patch_module(path, m, e, make, report):
    if getattr(m.forward, "_autokernel", False):
        return
    orig, had = m.forward, "forward" in m.__dict__
    new = make(e, m, orig)
    new._autokernel = True
    m.forward = new

    def undo():
        if had:
            m.forward = orig
        else:
            del m.forward
    _undo.append(undo)
    report.append(_entry(path, type(m).__name__, e))


def _patch_function(name, e, make, report):
    path = "torch.nn.functional." + name
    orig = getattr(F, name, None)
    if orig is None:
        report.skipped.append(dict(_entry(path, "function", e),
                                   reason="not in torch " + torch.__version__))
        return
    if getattr(orig, "_autokernel", False):
        return
    new = functools.wraps(orig)(make(e, orig))
    new._autokernel = True
    setattr(F, name, new)
    _undo.append(lambda: setattr(F, name, orig))
    report.append(_entry(path, "function", e))


def _skip_unpatched(model, report):
    e = _registry.for_op("rotary_embedding")
    for path, m in model.named_modules() if e else ():
        if "Rotary" in type(m).__name__:
            report.skipped.append(dict(_entry(path, type(m).__name__, e),
                                       reason=ROTARY_WHY))
    for op, why in NO_RULE.items():
        e = _registry.for_op(op)
        if e:
            report.skipped.append(dict(_entry("", "op", e), reason=why))


def patch(model):
    """Swaps model's matching modules, and torch.nn.functional's matching
    functions, for the exported kernels; returns a Report of them."""
    report = Report()
    for path, m in model.named_modules():
        for op, match, make in MODULE_RULES:
            e = _registry.for_op(op)
            if e and match(m):
                _patch_module(path or "(model)", m, e, make, report)
    for op, name, make in FUNCTION_RULES:
        e = _registry.for_op(op)
        if e:
            _patch_function(name, e, make, report)
    _skip_unpatched(model, report)
    return report


def unpatch():
    """Restores everything patch() changed; returns how many changes."""
    n = len(_undo)
    while _undo:
        _undo.pop()()
    return n
