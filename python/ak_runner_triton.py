#!/usr/bin/env python3
"""
ak_runner_triton.py: the runner of the triton backend, the Python twin of
backends/runner.c.  The parent (verify/client.c) starts it under the
interpreter that imports torch and speaks doc/runner-protocol.md to it:
one JSON request per line on stdin, one reply per line on stdout, tensor
data in a file both map.  The kernel is a module (doc/triton.md):

    def ak_kernel(a):           # a.inp, a.out: torch tensors on the device
        ...                     # a.scalar, a.stream, a.workspace, ...
        return 0                # or None; non-zero: "cannot run this case"

Every check of the C runner is made here: outputs poisoned (0xFF) before
every call, guard bands (4096 bytes of 0xA5) around every buffer, inputs
compared after a checked call, the L2 flushed before a timed one, a
device-wide synchronize before its end, and fresh inputs for every timed
call, whose output the parent checks.  A crash, a hang or a lost device
is the parent's to report; the runner never hides an error to go on.

    ak_runner_triton.py --check FILE    the build step: FILE's syntax,
                                        an error as Python prints it, exit 1

With AK_RUNNER_REFERENCE=1 it runs PyTorch's own ops instead, the
reference modules of python/torch_ref/ (`bench --torch`): the device
needs no Triton, and an ak_kernel() may return its outputs (a tensor, or
a tuple of them) rather than write a.out where PyTorch has no out=
variant; they are copied into a.out after the timed interval, so PyTorch
is not charged a copy its users never make (doc/triton.md).
"""
import ctypes
import importlib.util
import json
import mmap
import operator
import os
import struct
import sys
import time
import traceback

SLOTS = 8
GUARD = 4096
GUARD_BYTE = 0xA5
POISON_BYTE = 0xFF
# enum ak_dtype: F16, BF16, F32, F64, I32, I64
DTYPE_SIZE = [2, 2, 4, 8, 4, 8]

torch = None            # imported after the file descriptors are set up
ak_triton_device = None
dev = None              # the device (ak_triton_device), or None
init_error = ""
reference = False       # AK_RUNNER_REFERENCE=1: PyTorch's reference modules
proto = None            # the protocol's stdout
shm = None              # the mapping
slots = [None] * SLOTS


# ---- the benchmark's generator (include/ak-wire.h) ----

M64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
MIX_I = 0xD1B54A32D192ED03
FIN_1 = 0xBF58476D1CE4E5B9
FIN_2 = 0x94D049BB133111EB


def s64(x):
    """x mod 2^64 as the signed int64 torch and jansson hold."""
    x &= M64
    return x - (1 << 64) if x >> 63 else x


def fin(z):
    """splitmix64's finalizer, on a Python int."""
    z &= M64
    z ^= z >> 30
    z = (z * FIN_1) & M64
    z ^= z >> 27
    z = (z * FIN_2) & M64
    return z ^ (z >> 31)


def fin_(z):
    """The same, in place on an int64 tensor (shifts made logical)."""
    z ^= (z >> 30) & ((1 << 34) - 1)
    z *= s64(FIN_1)
    z ^= (z >> 27) & ((1 << 37) - 1)
    z *= s64(FIN_2)
    z ^= (z >> 31) & ((1 << 33) - 1)
    return z


def call_seed(seed, k):
    return fin(seed + (k + 1) * GOLDEN)


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def generate(view, g, seed, t):
    """Fills view (dense) with input tensor t's values under seed: on a
    CUDA device by one Triton kernel where it agrees with the torch form
    below (checked once per dtype and kind), else by torch's ops."""
    flat = view.view(-1)
    if flat.is_cuda and flat.numel() and fused_generator(flat, g):
        fused_generate(flat, g, seed, t)
    else:
        torch_generate(flat, g, seed, t)


def torch_generate(flat, g, seed, t):
    """generate() in torch's elementwise ops: some twenty passes over an
    int64 copy of every 2^24 elements, where the fused form makes one
    pass.  The form the others are checked against."""
    base = s64(seed ^ (GOLDEN * (t + 1)))
    step = 1 << 24
    for lo in range(0, flat.numel(), step):
        hi = min(flat.numel(), lo + step)
        h = torch.arange(lo, hi, dtype=torch.int64, device=flat.device)
        h.mul_(s64(MIX_I)).bitwise_xor_(base)
        fin_(h)
        if g.get("kind") == "index":
            v = ((h >> 32) & 0xFFFFFFFF) * int(g["n"]) >> 32
        else:
            z = ((h & 0xFFF) + ((h >> 12) & 0xFFF) + ((h >> 24) & 0xFFF) +
                 ((h >> 36) & 0xFFF) - 8190)
            # exact in f32: sd is a power of two; one rounding for mean
            v = z.to(torch.float32) * f32(float(g.get("sd", 1)) / 2048)
            v += f32(float(g.get("mean", 0)))
        flat[lo:hi].copy_(v)    # to the dtype, nearest even


# The fused form: the same hash, mix and rounding in one Triton kernel,
# made by fused_setup() when the runner opens a CUDA device (before the
# timing's snapshot, so the kernel is one of the parts a candidate must
# not replace); None where there is none.  Each (dtype, kind) is compared
# bit for bit with torch_generate() before its first use, and a
# disagreement leaves that pair to torch's ops.
_fused = None
_fused_ok = {}


def fused_setup():
    global _fused
    try:
        import triton
        import triton.language as tl
    except Exception as e:      # no Triton: torch's ops, as before
        ak_triton_device.trace("generate: no Triton (%s): torch's ops" % e)
        return

    @triton.jit(do_not_specialize=["base", "nidx"])
    def gen(out, n, base, scale, mean, nidx, INDEX: tl.constexpr,
            BLOCK: tl.constexpr):
        i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        b = base.to(tl.int64).to(tl.uint64, bitcast=True)
        h = i.to(tl.uint64, bitcast=True) * 0xD1B54A32D192ED03 ^ b
        h ^= h >> 30
        h *= 0xBF58476D1CE4E5B9
        h ^= h >> 27
        h *= 0x94D049BB133111EB
        h ^= h >> 31
        if INDEX:
            v = (((h >> 32) * nidx.to(tl.uint64)) >> 32).to(tl.int64)
        else:
            z = ((h & 0xFFF) + ((h >> 12) & 0xFFF) + ((h >> 24) & 0xFFF) +
                 ((h >> 36) & 0xFFF)).to(tl.int32) - 8190
            v = z.to(tl.float32) * scale + mean
        tl.store(out + i, v.to(out.dtype.element_ty), mask=i < n)

    _fused = gen


def fused_generate(flat, g, seed, t):
    index = g.get("kind") == "index"
    block = 1024
    _fused[((flat.numel() + block - 1) // block,)](
        flat, flat.numel(), s64(seed ^ (GOLDEN * (t + 1))),
        f32(float(g.get("sd", 1)) / 2048), f32(float(g.get("mean", 0))),
        int(g.get("n", 1)) if index else 1, INDEX=index, BLOCK=block)


def fused_generator(flat, g):
    """Whether generate() may use the fused form for flat's dtype and g's
    kind: Triton is here and agreed with torch's ops on a test fill."""
    key = (flat.dtype, g.get("kind"))
    if key not in _fused_ok:
        ok = False
        if _fused is not None:
            try:
                n = 70001       # past one block, and a ragged end
                a = torch.empty(n, dtype=flat.dtype, device=flat.device)
                b = torch.empty_like(a)
                for seed in (0, 0x9E3779B97F4A7C15, 12345):
                    fused_generate(a, g, seed, 3)
                    torch_generate(b, g, seed, 3)
                    if not torch.equal(a.view(torch.uint8),
                                       b.view(torch.uint8)):
                        break
                else:
                    ok = True
                if not ok:
                    ak_triton_device.trace(
                        "generate: the fused form disagrees with torch's "
                        "ops for %s %s: torch's ops" % key)
            except Exception as e:
                ak_triton_device.trace("generate: the fused form failed "
                                       "(%s): torch's ops" % e)
        _fused_ok[key] = ok
    return _fused_ok[key]


# ---- errors and replies ----

class Failure(Exception):
    """A request that cannot be answered: {"ok": false, "error": ...}."""

    def __init__(self, message, fatal=False, **extra):
        super().__init__(message)
        self.fatal = fatal
        self.extra = extra


def fail_reply(f):
    r = {"ok": False, "error": str(f), "fatal": f.fatal}
    r.update(f.extra)
    return r


def send(obj):
    proto.write(json.dumps(obj, separators=(",", ":")) + "\n")
    proto.flush()


def receive():
    line = sys.stdin.readline()
    if not line:
        sys.exit(0)     # the parent is gone
    return json.loads(line)


def device_call(fn, *args):
    """fn(*args) on the device; a device error is a Failure."""
    try:
        return fn(*args)
    except ak_triton_device.DeviceError as e:
        raise Failure(str(e), fatal=e.sticky)


# ---- kernels ----

class Args:
    """struct ak_args in Python: what ak_kernel(a) gets (doc/triton.md)."""

    def __init__(self, inp, out, scalar):
        self.inp, self.out = inp, out
        self.n_in, self.n_out = len(inp), len(out)
        self.scalar = list(scalar)
        self.stream = dev.stream
        self.workspace, self.workspace_size = None, 0
        self.results = None     # a reference's returned outputs


class Kernel:
    loaded = 0

    def __init__(self, path):
        Kernel.loaded += 1
        name = "ak_kernel_%d" % Kernel.loaded
        self.path = path
        try:
            spec = importlib.util.spec_from_file_location(name, path)
            mod = importlib.util.module_from_spec(spec)
            sys.modules[name] = mod
            spec.loader.exec_module(mod)
        except Exception as e:
            traceback.print_exc()
            raise Failure("cannot load the kernel: %s" % self.describe(e))
        self.fn = getattr(mod, "ak_kernel", None)
        self.ws = getattr(mod, "ak_workspace_size", None)
        if not callable(self.fn):
            raise Failure("the kernel does not define ak_kernel()")

    def describe(self, e):
        """The exception and the kernel's line it came from."""
        where = [f.lineno for f in traceback.extract_tb(e.__traceback__)
                 if f.filename == self.path]
        if isinstance(e, SyntaxError) and e.filename == self.path:
            where = [e.lineno]
        msg = str(e).strip().splitlines()
        text = type(e).__name__
        if msg:
            text += ": " + "\n".join(msg[:16])
        if where:
            text += " (kernel line %d)" % where[-1]
        return text

    def run(self, a):
        """ak_kernel(a) -> its return code, or a Failure.  A reference
        module's returned outputs go to a.results (deliver() them)."""
        try:
            try:
                r = self.fn(a)
            finally:
                # a kernel may leave a stream of its own current: the
                # runner's next work goes to its own, error or not
                dev.restore_stream()
            if reference and returned_outputs(r):
                a.results = list(r) if isinstance(r, (tuple, list)) else [r]
                return 0
            return 0 if r is None else operator.index(r)
        except Exception as e:
            traceback.print_exc()
            raise Failure("ak_kernel() raised %s" % self.describe(e),
                          fatal=dev.lost())

    def workspace_size(self, a):
        try:
            return operator.index(self.ws(a))
        except Exception as e:
            traceback.print_exc()
            raise Failure("ak_workspace_size() raised %s" % self.describe(e),
                          fatal=dev.lost())


def returned_outputs(r):
    """Whether r is what a reference may return: a tensor, or a tuple of
    them."""
    if isinstance(r, (tuple, list)):
        return len(r) > 0 and all(isinstance(t, torch.Tensor) for t in r)
    return isinstance(r, torch.Tensor)


def deliver(a):
    """A reference's returned outputs into a.out, after the timed interval:
    each of the output's dtype and shape, so that nothing is cast or
    broadcast on the way."""
    if a.results is None:
        return
    if len(a.results) != len(a.out):
        raise Failure("the reference returned %d outputs for %d" %
                      (len(a.results), len(a.out)))
    for i, (r, o) in enumerate(zip(a.results, a.out)):
        if r.dtype != o.dtype or r.shape != o.shape:
            raise Failure("the reference returned %s %s for output %d, "
                          "which is %s %s" % (r.dtype, list(r.shape), i,
                                              o.dtype, list(o.shape)))
        o.copy_(r)
    a.results = None


# ---- what the timing rests on ----

# dev's attributes that change from call to call by design
DEV_STATE = ("flush_value", "launched", "t0", "excess_us")
timer_snapshot = None


def timer_parts():
    """
    Everything the runner's timing and checks rest on: this module's and
    the device module's functions (with their code, defaults and
    closures), classes, methods, constants and modules, the device's
    attributes and its events, the flush buffer's memory, and the clocks,
    events and synchronizes of time and torch.cuda (their C functions
    too).  The kernel runs in this process and could replace any of them
    (a timer_stop that returns 1 us); they are compared, as the objects
    themselves (held, so an id cannot be reused), after every load and
    every call, outside the timed interval.  It cannot stop a kernel that
    writes this process's memory through ctypes, or one that puts back
    what it replaced before the check: the parent's bound on impossible
    times is the check of last resort.
    """
    parts = {}

    def put(key, v):
        parts[key] = v
        for attr in ("__code__", "__defaults__", "__closure__"):
            if hasattr(v, attr):
                parts[key + (attr,)] = getattr(v, attr)

    for mod in (sys.modules[__name__], ak_triton_device):
        for name, v in vars(mod).items():
            if not (callable(v) or name.isupper() or
                    isinstance(v, type(sys))):
                continue        # state, as timer_snapshot itself
            put((mod.__name__, name), v)
            if isinstance(v, type) and v.__module__ == mod.__name__:
                for m, f in vars(v).items():
                    if callable(f) or isinstance(f, (staticmethod,
                                                     classmethod)):
                        put((mod.__name__, name, m), f)
    parts[("REQUESTS",)] = tuple(sorted(REQUESTS.items()))
    for name, v in vars(dev).items():
        if name not in DEV_STATE:
            put(("dev", name), v)
    for i, e in enumerate(getattr(dev, "events", ())):
        parts[("dev", "events", str(i))] = e
    buf = getattr(dev, "flush_buf", None)
    if buf is not None:
        parts[("dev", "flush_buf", "memory")] = (buf.data_ptr(),
                                                 buf.numel())
    for name in ("perf_counter", "clock_gettime", "monotonic"):
        put(("time", name), getattr(time, name, None))
    cuda = torch.cuda
    for name in ("synchronize", "_sleep", "set_stream", "current_stream",
                 "Event", "Stream"):
        put(("torch.cuda", name), getattr(cuda, name, None))
    for name in ("record", "synchronize", "elapsed_time", "query"):
        put(("torch.cuda.Event", name), getattr(cuda.Event, name, None))
    for name in ("_cuda_synchronize", "_cuda_sleep", "_cuda_setStream"):
        put(("torch._C", name), getattr(torch._C, name, None))
    return parts


def same(a, b):
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a is b or (isinstance(a, int) and a == b)


def check_timer(what):
    """A Failure (fatal: this process can no longer be trusted) when the
    kernel replaced a part of the timing since the runner started."""
    global timer_snapshot
    now = timer_parts()
    if timer_snapshot is None:
        timer_snapshot = now
        return
    keys = [k for k in set(now) | set(timer_snapshot)
            if not same(now.get(k), timer_snapshot.get(k))]
    # a function replaced, not also its code, defaults and closure
    changed = sorted(".".join(k) for k in keys if k[:-1] not in keys)
    if changed:
        raise Failure("%s replaced the runner's %s: its times cannot be "
                      "trusted" % (what, ", ".join(changed[:4])),
                      fatal=True)


def kernel_in(slot):
    if not isinstance(slot, int) or not 0 <= slot < SLOTS or not slots[slot]:
        raise Failure("no kernel loaded in slot %s" % slot)
    return slots[slot]


# ---- the mapping and the tensors of a request ----

class Mapping:
    def __init__(self, path, size):
        self.path, self.size = path, size
        fd = os.open(path, os.O_RDWR)
        try:
            self.mm = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        self.t = torch.frombuffer(self.mm, dtype=torch.uint8)

    def close(self):
        del self.t
        try:
            self.mm.close()
        except BufferError:
            pass        # a view is still alive: the GC unmaps it


def map_shm(req):
    global shm
    path, size = req.get("shm"), req.get("size")
    if not isinstance(path, str) or not isinstance(size, int) or size <= 0:
        raise Failure("bad tensor layout in request")
    if shm and shm.path == path and size <= shm.size:
        return shm
    if shm:
        shm.close()
        shm = None
    try:
        shm = Mapping(path, size)
    except (OSError, ValueError) as e:
        raise Failure("cannot map '%s': %s" % (path, e))
    return shm


class Tensor:
    """One entry of a request's "tensors": dense, row-major."""

    def __init__(self, j, limit):
        self.dtype = j.get("dtype")
        self.shape = [int(d) for d in j.get("shape", [])]
        self.offset = int(j.get("offset", 0))
        self.out = bool(j.get("out"))
        if (not isinstance(self.dtype, int) or
                not 0 <= self.dtype < len(DTYPE_SIZE) or
                len(self.shape) > 4 or min(self.shape + [0]) < 0):
            raise Failure("bad tensor layout in request")
        self.numel = 1
        for d in self.shape:
            self.numel *= d
        self.esize = DTYPE_SIZE[self.dtype]
        self.nbytes = self.numel * self.esize
        if limit is not None and (self.offset < 0 or
                                  self.offset + self.nbytes > limit):
            raise Failure("bad tensor layout in request")

    def torch_dtype(self):
        return [torch.float16, torch.bfloat16, torch.float32, torch.float64,
                torch.int32, torch.int64][self.dtype]


class Layout:
    def __init__(self, req, limit):
        ts = req.get("tensors")
        if not isinstance(ts, list):
            raise Failure("bad tensor layout in request")
        self.all = [Tensor(t, limit) for t in ts]
        self.ins = [t for t in self.all if not t.out]
        self.outs = [t for t in self.all if t.out]
        if len(self.ins) > 8 or len(self.outs) > 8:
            raise Failure("bad tensor layout in request")
        sc = req.get("scalar") or []
        self.scalar = [float(sc[i]) if i < len(sc) else 0.0
                       for i in range(4)]


# ---- device buffers ----

class GBuf:
    """A device buffer with GUARD bytes of GUARD_BYTE on both sides."""

    def __init__(self, n):
        self.n = n
        self.base = dev.alloc(n + 2 * GUARD)
        dev.fill(self.base[:GUARD], GUARD_BYTE)
        dev.fill(self.base[GUARD + n:], GUARD_BYTE)
        self.data = self.base[GUARD:GUARD + n]

    def view(self, t):
        v = self.data.view(t.torch_dtype())
        return v.view(t.shape) if t.shape else v.view(())

    def check(self):
        """Which guard byte changed, as "N bytes before/after", or None."""
        head = dev.to_host(self.base[:GUARD])
        tail = dev.to_host(self.base[GUARD + self.n:])
        bad = (head != GUARD_BYTE).nonzero()
        if len(bad):
            return "%d bytes before the start" % (GUARD - int(bad.max()))
        bad = (tail != GUARD_BYTE).nonzero()
        if len(bad):
            return "%d bytes after the end" % (int(bad.min()) + 1)
        return None


class Set:
    """Device copies of a layout for one kernel: inputs (from the mapping
    when given, else zero), outputs poisoned, workspace, each in guard
    bands."""

    def __init__(self, lay, kernel, mapping=None):
        self.lay = lay
        self.ins = [GBuf(t.nbytes) for t in lay.ins]
        self.outs = [GBuf(t.nbytes) for t in lay.outs]
        for t, b in zip(lay.ins, self.ins):
            if mapping:
                dev.h2d(b.data, mapping.t[t.offset:t.offset + t.nbytes])
            else:
                dev.fill(b.data, 0)
        self.poison()
        self.in_views = [b.view(t) for t, b in zip(lay.ins, self.ins)]
        self.out_views = [b.view(t) for t, b in zip(lay.outs, self.outs)]
        self.ws = None
        if kernel.ws:
            n = kernel.workspace_size(self.args())
            if not 0 <= n <= 1 << 40:
                raise Failure("ak_workspace_size() asked for an absurd size")
            self.ws = GBuf(n)

    def args(self, ws=None):
        """A call's Args: new for every call, so that nothing a kernel
        does to them reaches the next.  ws: the set whose workspace it
        gets (this one by default)."""
        a = Args(list(self.in_views), list(self.out_views), self.lay.scalar)
        ws = (ws or self).ws
        if ws:
            a.workspace, a.workspace_size = ws.data, ws.n
        return a

    def poison(self):
        for b in self.outs:
            dev.fill(b.data, POISON_BYTE)

    def buffer(self, t):
        """The flat bytes of layout tensor t in this set."""
        i = self.lay.outs.index(t) if t.out else self.lay.ins.index(t)
        return (self.outs if t.out else self.ins)[i].data

    def guards(self, ws=True):
        """Guard bands intact (with ws, the workspace's too): None, or
        what was written outside."""
        for i, b in enumerate(self.outs):
            what = b.check()
            if what:
                return "wrote outside output %d: %s" % (i, what)
        if self.ws and ws:
            what = self.ws.check()
            if what:
                return "wrote outside its workspace: %s" % what
        for i, b in enumerate(self.ins):
            what = b.check()
            if what:
                return "wrote outside input %d: %s" % (i, what)
        return None

    def inputs_changed(self, mapping):
        for i, (t, b) in enumerate(zip(self.lay.ins, self.ins)):
            now = dev.to_host(b.data)
            was = mapping.t[t.offset:t.offset + t.nbytes]
            if not torch.equal(now, was):
                first = int((now != was).nonzero()[0])
                return "modified input %d at element %d" % (i,
                                                             first // t.esize)
        return None


# ---- requests ----

def req_hello(req):
    if not dev:
        return {"ok": False, "error": init_error, "no_device": True}
    info = dev.info()
    # host_timed: Python launches the kernel between the timing events,
    # so the parent checks each call before the next one (lockstep)
    # rather than on every core while this one is timed.  (The copies of
    # 77 to 109 us where the C runner takes 5 to 17, seen on the H200,
    # came from the timer instead: see CudaDevice.timer_stop.)
    info.update({"ok": True, "backend": "triton", "abi": 1,
                 "host_timed": True,
                 "python": "%d.%d.%d" % sys.version_info[:3]})
    if reference:
        import torch_ref
        why = torch_ref.compile_unavailable()
        info.update({"reference": "torch", "compile": why is None})
        if why:
            info["no_compile"] = why
    return info


def req_load(req):
    slot, path = req.get("slot"), req.get("path")
    if not isinstance(slot, int) or not 0 <= slot < SLOTS or \
            not isinstance(path, str):
        raise Failure("bad load request")
    slots[slot] = None
    slots[slot] = Kernel(path)
    check_timer("loading the kernel")
    return {"ok": True, "workspace": slots[slot].ws is not None}


def req_call(req):
    k = kernel_in(req.get("slot"))
    m = map_shm(req)
    lay = Layout(req, m.size)
    s = device_call(Set, lay, k, m)
    a = s.args()
    rc = k.run(a)
    check_timer("the kernel")
    deliver(a)
    device_call(dev.sync)
    why = device_call(s.guards) or device_call(s.inputs_changed, m)
    for t, b in zip(lay.outs, s.outs):
        dev.d2h(m.t[t.offset:t.offset + t.nbytes], b.data)
    r = {"ok": True, "rc": rc, "workspace_bytes": s.ws.n if s.ws else 0}
    if why:
        r["integrity"] = why
    return r


def req_gen(req):
    m = map_shm(req)
    lay = Layout(req, m.size)
    gens, seed = req.get("gen") or [], int(req.get("seed", 0)) & M64
    if len(gens) != len(lay.ins):
        raise Failure("'gen' needs one entry per input tensor")
    for i, (t, g) in enumerate(zip(lay.ins, gens)):
        b = dev.alloc(t.nbytes)
        generate(b.view(t.torch_dtype()), g, seed, i)
        dev.d2h(m.t[t.offset:t.offset + t.nbytes], b)
    device_call(dev.sync)
    return {"ok": True}


def req_warm(req):
    """Calls the kernel once on each case (zero inputs, nothing checked):
    Triton's JIT compile, the build step, before the stages."""
    k = kernel_in(req.get("slot"))
    t0 = time.perf_counter()
    cases = req.get("cases") or []
    for i, c in enumerate(cases):
        label = c.get("label", "case %d" % i)
        try:
            s = device_call(Set, Layout(c, None), k)
            a = s.args()
            k.run(a)
            check_timer("the kernel")
            deliver(a)
            device_call(dev.sync)
        except Failure as f:
            raise Failure("at %s: %s" % (label, f), f.fatal, case=i)
    return {"ok": True, "cases": len(cases),
            "seconds": time.perf_counter() - t0}


def req_ceilings(req):
    r = device_call(dev.ceilings)
    r["ok"] = True
    return r


class Bench:
    """The benchmark of doc/runner-protocol.md: rounds of one call of every
    slot and a device copy, fresh inputs for every call, every call's
    output sent to the parent to check."""

    def __init__(self, req):
        self.req = req
        self.slots = req.get("slots")
        if not isinstance(self.slots, list) or \
                not 1 <= len(self.slots) < SLOTS:
            raise Failure("bad slot list")
        self.kernels = [kernel_in(n) for n in self.slots]
        self.m = map_shm(req)
        self.lay = Layout(req, self.m.size)
        self.gens = req.get("gen") or []
        if len(self.gens) != len(self.lay.ins):
            raise Failure("'gen' needs one entry per input tensor")
        self.seed = int(req.get("seed", 0)) & M64
        self.check_offset = int(req.get("check_offset", 0))
        self.check_bytes = int(req.get("check_bytes", 0))
        if self.check_offset < 0 or self.check_bytes < 0 or \
                self.check_offset + 2 * self.check_bytes > self.m.size:
            raise Failure("the check area is outside the mapping")
        self.bufs = [device_call(Set, self.lay, k) for k in self.kernels]
        n = int(req.get("copy_bytes", 0)) // 2
        self.copy = (dev.alloc(n), dev.alloc(n)) if n else None
        if self.copy:
            dev.fill(self.copy[0], 0x3C)
        self.times = {str(n): [] for n in self.slots}
        self.times["copy"] = []
        self.excess = {key: [] for key in self.times}
        self.sets = {str(n): [] for n in self.slots}
        self.positions = {str(n): [] for n in self.slots}
        self.user = [None] * len(self.slots)    # on each set since its check
        self.calls = 0
        self.spent = 0.0

    def call(self, i, j, p, timed):
        """Call number self.calls, of slot i on set j (its workspace set
        i's), at position p of its round: steps 1 to 6.  Returns the final
        reply when the benchmark ends here, else None."""
        k, s, slot = self.kernels[i], self.bufs[j], self.slots[i]
        seed = call_seed(self.seed, self.calls)
        for t, g in enumerate(self.gens):
            generate(s.in_views[t], g, seed, t)
        s.poison()
        a = s.args(self.bufs[i])
        dev.flush_cache()
        dev.timer_start()
        rc = k.run(a)
        if rc:
            return {"ok": True, "rc": rc, "slot": slot}
        us = device_call(dev.timer_stop, "slot %d" % slot)
        check_timer("the kernel in slot %d" % slot)
        deliver(a)
        send({"call": self.calls, "slot": slot, "seed": s64(seed), "us": us})
        answer = receive()
        self.copy_spans(s, answer.get("spans") or [])
        send({"copied": self.calls})
        self.calls += 1
        self.spent += us / 1e3
        if timed:
            self.times[str(slot)].append(us)
            self.excess[str(slot)].append(dev.excess_us)
            self.sets[str(slot)].append(j)
            self.positions[str(slot)].append(p)
        if self.req.get("lockstep"):
            answer.update(receive())
        return self.finish() if answer.get("stop") else None

    def copy_spans(self, s, spans):
        off = self.check_offset + (self.check_bytes if self.calls % 2 else 0)
        end = off + self.check_bytes
        for span in spans:
            if not isinstance(span, list) or len(span) != 3 or \
                    not 0 <= span[0] < len(self.lay.all):
                raise Failure("bad span %s" % json.dumps(span))
            t = self.lay.all[span[0]]
            e, n = int(span[1]), int(span[2])
            if e < 0 or n < 0 or e + n > t.numel or off + n * t.esize > end:
                raise Failure("span %s is outside its tensor or the check "
                              "area" % json.dumps(span))
            dev.d2h(self.m.t[off:off + n * t.esize],
                    s.buffer(t)[e * t.esize:(e + n) * t.esize])
            off += n * t.esize

    def time_copy(self, timed):
        dst, src = self.copy
        dev.flush_cache()
        dev.timer_start()
        dev.copy(dst, src)
        us = device_call(dev.timer_stop, "copy")
        self.spent += us / 1e3
        if timed:
            self.times["copy"].append(us)
            self.excess["copy"].append(dev.excess_us)

    def run(self):
        warmup = int(self.req.get("warmup", 0))
        iters = int(self.req.get("iters", 0))
        min_iters = int(self.req.get("min_iters", 0))
        budget = float(self.req.get("budget_ms", 0))
        n = len(self.slots)
        for it in range(warmup + iters):
            # the C runner's round_slot() and round_set() (backends/runner.c)
            r = it - warmup if it >= warmup else it
            end = self.hand_over(r)
            if end:
                return end
            for p in range(n):
                i = (p + r) % n
                j = (i + r // n) % n
                self.user[j] = i
                end = self.call(i, j, p, it >= warmup)
                if end:
                    return end
            if self.copy:
                self.time_copy(it >= warmup)
            if budget > 0 and self.spent > budget and \
                    it >= warmup + min_iters and (r + 1) % (n * n) == 0:
                break
        return self.finish()

    def hand_over(self, r):
        """Before round r (None: after the last), the guard bands of every
        set about to change hands, so that a write outside a set's inputs
        or outputs is laid on the one kernel that ran on it since (the C
        runner's hand_over()).  The final reply, or None."""
        n = len(self.slots)
        for j, u in enumerate(self.user):
            nxt = None if r is None else (j - r // n) % n
            if u is None or u == nxt:
                continue
            why = device_call(self.bufs[j].guards, False)
            if why:
                return {"ok": True, "integrity": why, "slot": self.slots[u]}
            self.user[j] = None
        return None

    def finish(self):
        end = self.hand_over(None)
        if end:
            return end
        for slot, s in zip(self.slots, self.bufs):
            why = device_call(s.ws.check) if s.ws else None
            if why:
                return {"ok": True, "integrity": "wrote outside its "
                        "workspace: %s" % why, "slot": slot}
        times = dict(self.times)
        if not self.copy:
            del times["copy"]
        for slot in self.slots:
            key = str(slot)
            times[key], over = ak_triton_device.charge_escapes(
                times[key], self.excess[key], self.excess["copy"])
            if over > ak_triton_device.ESCAPE_US or \
                    ak_triton_device.tracing():
                ak_triton_device.trace(
                    "bench: slot %d waited %.1f us beyond the copy (median)%s"
                    % (slot, over, ", charged" if over >
                       ak_triton_device.ESCAPE_US else ""))
        return {"ok": True, "rc": 0, "times": times, "sets": self.sets,
                "positions": self.positions, "calls": self.calls}


def req_bench(req):
    b = Bench(req)
    try:
        return b.run()
    except Failure as f:
        f.extra.setdefault("calls", b.calls)
        raise


REQUESTS = {"load": req_load, "call": req_call, "bench": req_bench,
            "gen": req_gen, "warm": req_warm, "ceilings": req_ceilings}


def dispatch(req):
    what = req.get("req") if isinstance(req, dict) else None
    if what == "hello":
        return req_hello(req)
    try:
        if not what:
            raise Failure("request without 'req'")
        if not dev:
            raise Failure(init_error)
        if what not in REQUESTS:
            raise Failure("unknown request '%s'" % what)
        return REQUESTS[what](req)
    except Failure as f:
        return fail_reply(f)
    except Exception as e:     # torch's own errors: out of memory ...
        traceback.print_exc()
        return fail_reply(Failure("%s: %s" % (type(e).__name__, e),
                                  fatal=dev.lost()))


# ---- the process ----

def check(path):
    """The build step: path compiles, or the error as Python prints it."""
    try:
        with open(path, "rb") as f:
            compile(f.read(), path, "exec", dont_inherit=True)
    except SyntaxError as e:
        sys.stderr.write("".join(traceback.format_exception_only(
            type(e), e)))
        return 1
    except (OSError, ValueError) as e:
        sys.stderr.write("%s: %s\n" % (path, e))
        return 1
    return 0


def setup_fds():
    """Our stdout is the protocol: whatever else prints goes to stderr,
    which goes to $AK_RUNNER_STDERR when set."""
    global proto
    err = os.environ.get("AK_RUNNER_STDERR")
    if err:
        try:
            fd = os.open(err, os.O_WRONLY | os.O_APPEND)
            os.dup2(fd, 2)
            os.close(fd)
        except OSError:
            pass
    proto = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    # a hung kernel must not outlive the tool: PR_SET_PDEATHSIG, SIGKILL
    try:
        ctypes.CDLL(None).prctl(1, 9)
    except (OSError, AttributeError):
        pass


def main():
    global torch, ak_triton_device, dev, init_error, reference
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        return check(sys.argv[2])
    if len(sys.argv) != 1:
        sys.stderr.write("usage: ak_runner_triton.py [--check FILE]\n")
        return 2
    setup_fds()
    reference = os.environ.get("AK_RUNNER_REFERENCE") == "1"
    try:
        import torch as t
        torch = t
        import ak_triton_device as d
        ak_triton_device = d
        dev = d.open_device(need_triton=not reference)
        if isinstance(dev, d.CudaDevice):
            fused_setup()
        check_timer("")
    except Exception as e:      # ImportError, DeviceError, CUDA errors
        traceback.print_exc()
        init_error = "%s: %s" % (type(e).__name__, e)
    for line in sys.stdin:
        try:
            req = json.loads(line)
        except ValueError as e:
            req = None
            res = {"ok": False, "error": "bad request: %s" % e}
        if req is not None:
            res = dispatch(req)
        send(res)
        if res.get("fatal"):
            return 4
    return 0


if __name__ == "__main__":
    sys.exit(main())
