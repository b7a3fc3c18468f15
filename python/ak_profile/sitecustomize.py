"""The start-up module of `git autokernel profile -- CMD`.

The tool puts this folder first on PYTHONPATH, so every Python process
that CMD starts imports this module before its program runs.  When the
program imports torch, the module starts torch.profiler (CPU and CUDA,
record_shapes=True) and at exit writes its chrome trace to
$AK_PROFILE_TRACE_DIR/trace-<pid>.json, which the tool reads as it reads a
trace given on its command line: the same recognizers, shapes, floors and
bounds.  torch.profiler records the kernels through CUPTI itself, and
CUPTI serves one client, so the module takes the tool's injection library
out of CUDA_INJECTION64_PATH before CUDA starts; a program that never
imports torch keeps it, and its kernels are mapped by name.

A process that ends in os._exit() (a forked worker) writes no trace.  A
program that runs torch.profiler itself cannot run under this one: give
the tool its trace instead (`git autokernel profile TRACE.json`).

Without AK_PROFILE_TRACE_DIR it does nothing; either way the next
sitecustomize on the path runs after it, as it would have without it.
"""
import atexit
import importlib.abc
import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def trace_path(directory):
    return os.path.join(directory, "trace-%d.json" % os.getpid())


def start(torch, directory):
    """Profile from now to the interpreter's exit."""
    from torch.profiler import ProfilerActivity, profile, supported_activities

    os.environ.pop("CUDA_INJECTION64_PATH", None)   # CUDA is not up yet
    activities = [a for a in (ProfilerActivity.CPU, ProfilerActivity.CUDA)
                  if a in supported_activities()]
    prof = profile(activities=activities, record_shapes=True)
    prof.start()

    def stop():
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize()
        prof.stop()
        prof.export_chrome_trace(trace_path(directory))

    atexit.register(stop)


class TorchLoader(importlib.abc.Loader):
    """torch's own loader, and the profiler started once torch is in."""

    def __init__(self, loader, directory):
        self.loader, self.directory = loader, directory

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        start(module, self.directory)

    def __getattr__(self, name):
        return getattr(self.loader, name)


class TorchFinder(importlib.abc.MetaPathFinder):
    """Finds torch as the finders after it would, once, with TorchLoader."""

    def __init__(self, directory):
        self.directory = directory

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader = TorchLoader(spec.loader, self.directory)
        return spec


def chain():
    """Runs the sitecustomize that this one shadows, if there is one."""
    for d in sys.path:
        path = os.path.join(d or ".", "sitecustomize.py")
        if os.path.abspath(d or ".") == HERE or not os.path.isfile(path):
            continue
        with open(path) as f:
            code = compile(f.read(), path, "exec")
        exec(code, {"__name__": "sitecustomize", "__file__": path})
        return


def main():
    directory = os.environ.get("AK_PROFILE_TRACE_DIR")
    if directory and "torch" not in sys.modules:
        sys.meta_path.insert(0, TorchFinder(directory))
    chain()


main()
