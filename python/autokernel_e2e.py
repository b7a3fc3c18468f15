"""autokernel_e2e.py: a model with and without the exported kernels.

`git autokernel e2e` runs it under the interpreter that imports torch:

    autokernel_e2e.py --package DIR [--json] [--json-out FILE]
                      [--warmup N] [--repeats N] -- SCRIPT [ARGS...]

SCRIPT defines autokernel_model(), or autokernel_model(args) with ARGS as a
list of strings, returning (model, inputs): inputs is a tensor, a tuple of
positional arguments or a dict of keyword arguments.  Under no_grad, the
driver

  1. runs a copy of the model as the reference: fp64 on the CPU or for an
     fp32 model, else fp32 (TF32 off);
  2. patches the model with the package and runs it once, counting which
     calls went to a kernel and which fell back;
  3. runs it eager, at its own dtype (the package paused);
  4. times eager and patched interleaved after a warm-up: the median of
     the repeats, by CUDA events on a GPU, perf_counter on the CPU;
  5. judges accuracy (doc/pytorch.md): err = ||out - ref|| / ||ref|| over
     the model's output (its logits if it has them); the patched model
     passes when its err is at most 1.1 times the eager model's.  The max
     relative error (max |out - ref| / max |ref|) and top-1 agreement with
     the reference are reported beside, against the dtype's tolerances
     below, for information: they do not decide.

It prints a table, or with --json the result as JSON; --json-out writes
the JSON to FILE as well.  Exit 0 accurate, 1 not accurate (or SCRIPT
raised), 2 SCRIPT has no autokernel_model() or it returned something else,
3 the package does not import.
"""
import argparse
import copy
import importlib.util
import inspect
import json
import math
import os
import statistics
import sys
import time
import traceback

import torch

ALLOWED = 1.10
# by dtype: (max relative error, top-1 agreement), for information
TOLERANCE = {
    torch.float64: (1e-12, 1.0),
    torch.float32: (1e-4, 0.99),
    torch.float16: (1e-2, 0.95),
    torch.bfloat16: (8e-2, 0.90),
}
SHORT = {torch.float64: "f64", torch.float32: "f32", torch.float16: "f16",
         torch.bfloat16: "bf16"}


class Usage(Exception):
    """SCRIPT is not what e2e runs: exit 2."""


def parse(argv):
    p = argparse.ArgumentParser(prog="autokernel_e2e.py")
    p.add_argument("--package", required=True)
    p.add_argument("--json", action="store_true")
    p.add_argument("--json-out")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("script")
    p.add_argument("args", nargs=argparse.REMAINDER)
    return p.parse_args(argv)


def load_package(path):
    """The exported package in path, imported as autokernel_ops."""
    path = os.path.abspath(path)
    spec = importlib.util.spec_from_file_location(
        "autokernel_ops", os.path.join(path, "__init__.py"),
        submodule_search_locations=[path])
    module = importlib.util.module_from_spec(spec)
    sys.modules["autokernel_ops"] = module
    spec.loader.exec_module(module)
    return module


def load_model(script, args):
    """(model, args, kwargs) from SCRIPT's autokernel_model()."""
    if not os.path.isfile(script):
        raise Usage("no such script: %s" % script)
    sys.argv = [script] + args
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    spec = importlib.util.spec_from_file_location("autokernel_script", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    make = getattr(module, "autokernel_model", None)
    if not callable(make):
        raise Usage("%s defines no autokernel_model(): it must return "
                    "(model, inputs)" % script)
    got = make(args) if inspect.signature(make).parameters else make()
    if not (isinstance(got, tuple) and len(got) == 2 and
            isinstance(got[0], torch.nn.Module)):
        raise Usage("autokernel_model() returned %s, not (model, inputs)"
                    % type(got).__name__)
    model, inputs = got
    if isinstance(inputs, dict):
        return model, (), inputs
    if isinstance(inputs, torch.Tensor):
        return model, (inputs,), {}
    return model, tuple(inputs), {}


def model_dtype(model):
    for p in model.parameters():
        if p.is_floating_point():
            return p.dtype, p.device
    return torch.float32, torch.device("cpu")


def cast(obj, dtype):
    """obj with its floating tensors (nested in tuples, lists and dicts)
    converted to dtype."""
    if isinstance(obj, torch.Tensor):
        return obj.to(dtype) if obj.is_floating_point() else obj
    if isinstance(obj, (tuple, list)):
        return type(obj)(cast(o, dtype) for o in obj)
    if isinstance(obj, dict):
        return {k: cast(v, dtype) for k, v in obj.items()}
    return obj


def primary(out):
    """The output judged, in fp64: the logits if the model has them, else
    its first floating tensor."""
    if isinstance(out, dict) and "logits" in out:
        out = out["logits"]
    elif hasattr(out, "logits"):
        out = out.logits
    if not isinstance(out, torch.Tensor):
        items = out.values() if isinstance(out, dict) else out
        out = next((o for o in items if isinstance(o, torch.Tensor) and
                    o.is_floating_point()), None)
    if out is None:
        raise Usage("the model's output holds no floating tensor")
    return out.detach().to(torch.float64).clone()


def reference(model, args, kwargs, dtype):
    ref = copy.deepcopy(model).to(dtype)
    tf32 = torch.backends.cuda.matmul.allow_tf32, \
        torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        return primary(ref(*cast(args, dtype), **cast(kwargs, dtype)))
    finally:
        torch.backends.cuda.matmul.allow_tf32, \
            torch.backends.cudnn.allow_tf32 = tf32


def errors(out, ref):
    d = out - ref
    top1 = None
    if out.dim() >= 2 and out.shape[-1] > 1:
        top1 = (out.argmax(-1) == ref.argmax(-1)).double().mean().item()
    return {"rel_err": (d.norm() / ref.norm()).item(),
            "max_rel_err": (d.abs().max() / ref.abs().max()).item(),
            "top1": top1}


def measure(device):
    """A function timing a call in ms, and the name of its clock."""
    if device.type == "cuda":
        def cuda(fn):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            fn()
            torch.cuda.synchronize()
            end.record()
            end.synchronize()
            return start.elapsed_time(end)
        return cuda, "cuda events"

    def cpu(fn):
        t = time.perf_counter()
        fn()
        return (time.perf_counter() - t) * 1e3
    return cpu, "perf_counter"


def summary(ms):
    q = statistics.quantiles(ms, n=4) if len(ms) >= 2 else [ms[0]] * 3
    return {"median_ms": statistics.median(ms), "q1_ms": q[0],
            "q3_ms": q[2]}


def time_both(ak, model, args, kwargs, device, o):
    """Eager and patched, interleaved (the order alternates)."""
    clock, name = measure(device)

    def eager():
        with ak.paused():
            model(*args, **kwargs)

    def patched():
        model(*args, **kwargs)
    for _ in range(o.warmup):
        eager()
        patched()
    ms = {eager: [], patched: []}
    for i in range(o.repeats):
        for fn in (eager, patched) if i % 2 == 0 else (patched, eager):
            ms[fn].append(clock(fn))
    return {"timer": name, "warmup": o.warmup, "repeats": o.repeats,
            "eager": summary(ms[eager]), "patched": summary(ms[patched])}


def time_compiled(model, args, kwargs, device, o):
    """torch.compile of the eager model, for comparison: on a GPU, where
    torch has it; its median, or why not."""
    if device.type != "cuda" or not hasattr(torch, "compile"):
        return None
    clock, name = measure(device)
    try:
        fast = torch.compile(model)
        for _ in range(o.warmup + 2):
            fast(*args, **kwargs)
        ms = [clock(lambda: fast(*args, **kwargs)) for _ in range(o.repeats)]
    except Exception as e:      # compile is the comparison, not the test
        return {"error": "%s: %s" % (type(e).__name__, str(e)[:200])}
    return summary(ms)


def judge(eager, patched, dtype):
    allowed = ALLOWED * eager["rel_err"]
    tol = TOLERANCE.get(dtype, TOLERANCE[torch.float32])
    return {"rule": "patched rel_err <= 1.1 x eager rel_err",
            "eager": eager, "patched": patched, "allowed_rel_err": allowed,
            "tolerance": {"max_rel_err": tol[0], "top1": tol[1]},
            "pass": patched["rel_err"] <= allowed}


def device_name(device):
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return "cpu"


def run(o, ak):
    model, args, kwargs = load_model(o.script, o.args)
    dtype, device = model_dtype(model)
    ref_dtype = torch.float64 \
        if device.type == "cpu" or dtype == torch.float32 else torch.float32
    with torch.no_grad():
        ref = reference(model, args, kwargs, ref_dtype)
        report = ak.patch(model)
        ak.reset_stats()
        patched = primary(model(*args, **kwargs))
        calls = ak.stats()
        with ak.paused():
            eager = primary(model(*args, **kwargs))
        times = time_both(ak, model, args, kwargs, device, o)
    ak.unpatch()
    with torch.no_grad():
        times["compiled"] = time_compiled(model, args, kwargs, device, o)
    ran = sum(c["calls"] for c in calls if c["path"] == "kernel")
    speedup = times["eager"]["median_ms"] / times["patched"]["median_ms"]
    accuracy = judge(errors(eager, ref), errors(patched, ref), dtype)
    return {
        "script": o.script, "args": o.args, "torch": torch.__version__,
        "device": device_name(device), "dtype": SHORT.get(dtype, str(dtype)),
        "reference_dtype": SHORT[ref_dtype],
        "kernels": [{k: x[k] for k in ("name", "op", "backend", "commit")}
                    for x in ak.kernels()],
        "patched": list(report), "skipped": report.skipped, "calls": calls,
        "kernel_calls": ran,
        "fallback_calls": sum(c["calls"] for c in calls) - ran,
        "fell_back_everywhere": ran == 0, "time": times,
        "speedup": speedup if ran else None,
        "accuracy": accuracy, "pass": accuracy["pass"],
    }


def fmt(x, spec="%.3g"):
    return "-" if x is None else spec % x


def print_patched(r):
    if not r["patched"]:
        names = ", ".join(k["name"] for k in r["kernels"]) or "none"
        print("patched: nothing (exported: %s)" % names)
    for p in r["patched"]:
        print("patched: %-32s %-16s -> torch.ops.autokernel.%s"
              % (p["path"], p["kind"], p["kernel"]))
    for s in r["skipped"]:
        print("not patched: %s %s: %s" % (s["path"] or s["op"], s["kind"],
                                          s["reason"]))


def print_calls(r):
    print("calls per forward:")
    print("  %-16s %-14s %-5s %-8s %5s  %s"
          % ("kernel", "shape", "dtype", "path", "calls", "reason"))
    for c in r["calls"]:
        print("  %-16s %-14s %-5s %-8s %5d  %s"
              % (c["name"], c["shape"], c["dtype"], c["path"], c["calls"],
                 c["reason"]))
    if not r["calls"]:
        print("  none: the model called nothing that was patched")


def print_accuracy(r):
    a = r["accuracy"]
    tol = a["tolerance"]
    row = "  %-10s %12s %12s %8s"
    print("accuracy against the %s reference:" % r["reference_dtype"])
    print(row % ("", "rel err", "max rel err", "top-1"))
    for name in ("eager", "patched"):
        e = a[name]
        print(row % (name, fmt(e["rel_err"]), fmt(e["max_rel_err"]),
                     top1_text(e["top1"])))
    print(row % ("allowed", "<= " + fmt(a["allowed_rel_err"]),
                 "<= " + fmt(tol["max_rel_err"]),
                 ">= " + top1_text(tol["top1"])))
    print("accuracy: %s (patched error %s %s %s, 1.1 x the eager model's "
          "%s)" % ("pass" if a["pass"] else "FAIL",
                   fmt(a["patched"]["rel_err"]),
                   "<=" if a["pass"] else ">", fmt(a["allowed_rel_err"]),
                   fmt(a["eager"]["rel_err"])))


def top1_text(x):
    return "-" if x is None else "%.1f%%" % (100 * x)


def print_table(r):
    print("e2e: %s on %s (%s; reference %s), torch %s"
          % (os.path.basename(r["script"]), r["device"], r["dtype"],
             r["reference_dtype"], r["torch"]))
    print_patched(r)
    print_calls(r)
    t = r["time"]
    print("time (median of %d, %s): eager %.3f ms, patched %.3f ms"
          % (t["repeats"], t["timer"], t["eager"]["median_ms"],
             t["patched"]["median_ms"]))
    c = t.get("compiled")
    if c and "median_ms" in c:
        print("torch.compile of the eager model: %.3f ms (patched is "
              "%.2fx of it)" % (c["median_ms"], c["median_ms"] /
                                t["patched"]["median_ms"]))
    elif c:
        print("torch.compile of the eager model failed: %s" % c["error"])
    if r["fell_back_everywhere"]:
        print("fell back everywhere: no call went to an exported kernel; "
              "no speedup claimed")
    else:
        print("speedup: %.2fx (%d calls to kernels, %d fell back, per "
              "forward)" % (r["speedup"], r["kernel_calls"],
                            r["fallback_calls"]))
    print_accuracy(r)


def finite(obj):
    """obj with NaN and infinities as strings: JSON has no numbers for
    them."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj


def main(argv):
    o = parse(argv)
    try:
        ak = load_package(o.package)
    except Exception as e:
        print("error: unable to import the package in %s: %s"
              % (o.package, e), file=sys.stderr)
        return 3
    try:
        r = run(o, ak)
    except Usage as e:
        print("error: %s" % e, file=sys.stderr)
        return 2
    except Exception:
        traceback.print_exc()
        print("error: %s raised (above)" % o.script, file=sys.stderr)
        return 1
    text = json.dumps(finite(r), indent=2)
    if o.json_out:
        with open(o.json_out, "w") as f:
            f.write(text + "\n")
    if o.json:
        print(text)
    else:
        print_table(r)
    return 0 if r["pass"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
