"""The shared object of a kernel for the device this process runs on.

export ships the object built for the device the kernel was verified on.
Where this device differs (another GPU arch; for the host backend, another
machine or CPU model, since it is built with -march=native) the kernel is
rebuilt with the manifest's compiler flags into a cache directory
($AUTOKERNEL_CACHE/python, else ~/.cache/git-autokernel/python), keyed by a
hash of the command, the compiler's version, the source and the header.
"""
import hashlib
import os
import platform
import shutil
import subprocess

import torch

BUILD_TIMEOUT_S = 600


class BuildError(Exception):
    """Why there is no kernel for this device."""


def _cpu_name():
    # as backends/dev-host.c names it: the first "model name" of cpuinfo
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and ":" in line:
                    return line.partition(":")[2][1:].rstrip("\n")
    except OSError:
        pass
    return "unknown CPU"


def device_arch(backend):
    """(arch, name) of this process's device for a backend."""
    if backend == "host":
        return platform.machine(), _cpu_name()
    if not torch.cuda.is_available():
        raise BuildError("no GPU: torch.cuda is not available")
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    if backend == "hip":
        return props.gcnArchName.split(":")[0], props.name
    return "sm_%d%d" % (props.major, props.minor), props.name


def _same_device(backend, exported, arch, name):
    if exported.get("arch") != arch:
        return False
    return backend != "host" or exported.get("name") == name


def arch_flags(backend, arch):
    """The flags that pick the device: arch_args() of backends/build.c."""
    if backend == "cuda":
        if arch == "sm_90":
            return ["-gencode=arch=compute_90a,code=sm_90a"]
        return ["-arch=" + arch]
    if backend == "hip":
        return ["--offload-arch=" + arch]
    return []


def _compiler(backend, build):
    env = {"host": "AUTOKERNEL_CC", "cuda": "AUTOKERNEL_NVCC",
           "hip": "AUTOKERNEL_HIPCC"}[backend]
    if os.environ.get(env):
        return os.environ[env]
    if os.path.isabs(build["compiler"]) and os.path.exists(build["compiler"]):
        return build["compiler"]
    found = shutil.which(os.path.basename(build["compiler"]))
    if not found:
        raise BuildError("no compiler %s" % build["compiler"])
    return found


def _run(argv):
    try:
        p = subprocess.run(argv, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=BUILD_TIMEOUT_S, universal_newlines=True)
    except subprocess.TimeoutExpired:
        raise BuildError("%s timed out after %d s" % (argv[0],
                                                      BUILD_TIMEOUT_S))
    except OSError as e:
        raise BuildError("cannot run %s: %s" % (argv[0], e))
    return p.returncode, p.stdout


def _cache_dir():
    base = os.environ.get("AUTOKERNEL_CACHE")
    if not base:
        xdg = os.environ.get("XDG_CACHE_HOME") or \
            os.path.join(os.path.expanduser("~"), ".cache")
        base = os.path.join(xdg, "git-autokernel")
    return os.path.join(base, "python")


def rebuild(pkg, kernel, arch):
    """Builds kernel's source for arch into the cache; the object's path."""
    build = kernel["build"]
    backend = kernel["backend"]
    src = os.path.join(pkg, kernel["files"]["source"])
    include = os.path.join(pkg, "include")
    cc = _compiler(backend, build)
    cmd = [cc] + build["flags"] + arch_flags(backend, arch) + \
        ["-I" + include]
    h = hashlib.sha256()
    _, version = _run([cc, "--version"])
    for part in cmd + [version]:
        h.update(part.encode() + b"\n")
    headers = sorted(f for f in os.listdir(include) if f.endswith(".h"))
    for path in [os.path.join(include, f) for f in headers] + [src]:
        with open(path, "rb") as f:
            h.update(f.read())
    out_dir = _cache_dir()
    os.makedirs(out_dir, exist_ok=True)
    so = os.path.join(out_dir, h.hexdigest() + ".so")
    if os.path.exists(so):
        return so
    tmp = "%s.%d.tmp.so" % (so[:-3], os.getpid())
    rc, log = _run(cmd + ["-o", tmp, src] + build["libs"])
    if rc != 0:
        first = log.strip().splitlines()[:1] or [""]
        raise BuildError("unable to build %s for %s: %s exited with %d: %s"
                         % (kernel["files"]["source"], arch,
                            os.path.basename(cc), rc, first[0]))
    os.replace(tmp, so)
    return so


def object_for_device(pkg, kernel):
    """The path of a shared object of kernel for this device (the exported
    one, else a rebuild), or BuildError."""
    backend = kernel["backend"]
    arch, name = device_arch(backend)
    exported = kernel.get("device") or {}
    obj = kernel["files"].get("object")
    if obj and _same_device(backend, exported, arch, name):
        return os.path.join(pkg, obj)
    try:
        return rebuild(pkg, kernel, arch)
    except BuildError as e:
        raise BuildError("no kernel for %s (%s), exported for %s (%s): %s"
                         % (arch, name, exported.get("arch"),
                            exported.get("name"), e))
