#!/usr/bin/env python3
"""
triton-proto.py RUNNER [cuda]: the Triton runner's protocol spoken as the
parent (verify/client.c) speaks it, request by request, with kernels that
cheat; TAP on stdout.  On the fake device by default (CPU torch, no GPU, no
Triton); with "cuda", the same kernels on the GPU.  The benchmark's
generator is written again here from doc/runner-protocol.md, in integers,
so the runner's (torch arithmetic on the device) is checked against it.
"""
import atexit
import json
import math
import mmap
import os
import random
import select
import shutil
import struct
import subprocess
import sys
import tempfile

RUNNER = sys.argv[1]
DEVICE = sys.argv[2] if len(sys.argv) > 2 else "fake"
TMP = tempfile.mkdtemp(prefix="ak-proto-")
atexit.register(shutil.rmtree, TMP, True)
SHM_SIZE = 8 << 20
F16, BF16, F32, F64, I32, I64 = range(6)
SIZE = [2, 2, 4, 8, 4, 8]
FMT = ["<e", "<H", "<f", "<d", "<i", "<q"]

# ---- the generator, from the doc ----

M64 = (1 << 64) - 1


def fin(z):
    z &= M64
    z ^= z >> 30
    z = (z * 0xBF58476D1CE4E5B9) & M64
    z ^= z >> 27
    z = (z * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def mix(seed, t, i):
    return fin(seed ^ ((0x9E3779B97F4A7C15 * (t + 1)) & M64) ^
               ((i * 0xD1B54A32D192ED03) & M64))


def call_seed(seed, k):
    return fin(seed + (k + 1) * 0x9E3779B97F4A7C15)


def to_f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def bf16_bits(x):
    u = struct.unpack("<I", struct.pack("<f", x))[0]
    return (u + 0x7FFF + ((u >> 16) & 1)) >> 16


def gen_bytes(g, dt, seed, t, lo, n):
    """Elements lo .. lo+n-1 of input t as stored."""
    out = b""
    for i in range(lo, lo + n):
        h = mix(seed, t, i)
        if g["kind"] == "index":
            out += struct.pack(FMT[dt], ((h >> 32) * g["n"]) >> 32)
            continue
        z = sum((h >> s) & 0xFFF for s in (0, 12, 24, 36)) - 8190
        v = to_f32(to_f32(z * g["sd"] / 2048) + to_f32(g["mean"]))
        out += struct.pack("<H", bf16_bits(v)) if dt == BF16 else \
            struct.pack(FMT[dt], v)
    return out


def values(raw, dt):
    n = len(raw) // SIZE[dt]
    if dt == BF16:
        return [struct.unpack("<f", struct.pack("<I", b << 16))[0]
                for b in struct.unpack("<%dH" % n, raw)]
    return list(struct.unpack("<%d%s" % (n, FMT[dt][1]), raw))


# ---- the parent ----

class Runner:
    def __init__(self, reference=False):
        self.err = os.path.join(TMP, "stderr")
        open(self.err, "w").close()
        env = dict(os.environ, AK_RUNNER_STDERR=self.err,
                   AUTOKERNEL_TRITON_DEVICE=DEVICE)
        if reference:       # PyTorch's own ops (python/torch_ref/)
            env["AK_RUNNER_REFERENCE"] = "1"
        self.p = subprocess.Popen([sys.executable, RUNNER], env=env,
                                  stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE)
        self.buf = b""

    def send(self, obj):
        self.p.stdin.write((json.dumps(obj) + "\n").encode())
        self.p.stdin.flush()

    def line(self, timeout=120):
        fd = self.p.stdout.fileno()
        while b"\n" not in self.buf:
            if not select.select([fd], [], [], timeout)[0]:
                raise RuntimeError("no answer in %d s" % timeout)
            chunk = os.read(fd, 65536)
            if not chunk:
                raise EOFError("the runner exited: %s" % self.p.wait())
            self.buf += chunk
        text, self.buf = self.buf.split(b"\n", 1)
        return json.loads(text)

    def ask(self, obj, timeout=120):
        self.send(obj)
        return self.line(timeout)

    def stop(self):
        self.p.stdin.close()
        self.p.wait()


class Shm:
    def __init__(self):
        self.path = os.path.join(TMP, "tensors")
        with open(self.path, "wb") as f:
            f.truncate(SHM_SIZE)
        fd = os.open(self.path, os.O_RDWR)
        self.mm = mmap.mmap(fd, SHM_SIZE)
        os.close(fd)


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def layout(specs):
    """[(dtype, shape, out)] -> tensors with offsets, 256-aligned."""
    off, ts = 0, []
    for dt, shape, out in specs:
        ts.append({"dtype": dt, "shape": shape, "offset": off, "out": out})
        off = (off + numel(shape) * SIZE[dt] + 255) & ~255
    return ts, off


def request(kind, shm, tensors, **kw):
    r = {"req": kind, "shm": shm.path, "size": SHM_SIZE, "tensors": tensors,
         "scalar": [0.0, 0.0, 0.0, 0.0]}
    r.update(kw)
    return r


def softmax_ref(row):
    m = max(row)
    e = [math.exp(v - m) for v in row]
    s = sum(e)
    return [v / s for v in e]


# ---- the kernels ----

GOOD = """
import torch
def ak_kernel(a):
    x, = a.inp
    a.out[0].copy_(torch.softmax(x.float(), dim=-1))
"""

KERNELS = {
    "good": GOOD,
    "nothing": "def ak_kernel(a):\n    pass\n",
    "after": GOOD + """    y = a.out[0].view(-1)
    y.as_strided((y.numel() + 1,), (1,))[-1] = 1
""",
    "before": GOOD + """    y = a.out[0].view(-1)
    y.as_strided((1,), (1,), y.storage_offset() - 1)[0] = 1
""",
    "scribble": GOOD + "    a.inp[0].view(-1)[3] = 0\n",
    "raise": GOOD + "    return 1 // 0\n",
    "rc3": "def ak_kernel(a):\n    return 3\n",
    "talks": GOOD + "    print('hello from the kernel')\n",
    "workspace": GOOD + """    a.workspace[a.workspace_size - 1] = 7
def ak_workspace_size(a):
    return 64 * a.inp[0].shape[0]
""",
    "ws-over": GOOD + """    a.workspace.as_strided((65,), (1,))[64] = 7
def ak_workspace_size(a):
    return 64
""",
    "ws-absurd": GOOD + "def ak_workspace_size(a):\n    return 1 << 50\n",
    "syntax": "def ak_kernel(a:\n    pass\n",
    "no-entry": "import torch\nx = 1\n",
    "import-raises": "import torch\nraise ValueError('no such weights')\n",
    "exits": "import os\ndef ak_kernel(a):\n    os._exit(7)\n",
    # right on the first call of each shape, then the same answer again
    "remembers": """
import torch
seen = {}
def ak_kernel(a):
    x, y = a.inp[0], a.out[0]
    key = (x.data_ptr(), tuple(x.shape))
    if key not in seen:
        seen[key] = torch.softmax(x.float(), dim=-1).to(y.dtype)
    y.copy_(seen[key])
""",
    # right on its first three calls, then writes nothing
    "tires": """
import torch
calls = [0]
def ak_kernel(a):
    calls[0] += 1
    if calls[0] <= 3:
        a.out[0].copy_(torch.softmax(a.inp[0].float(), dim=-1))
""",
    # the last row only, until the fourth call, then past the end too
    "late-oob": GOOD + """    calls.append(1)
    if len(calls) == 4:
        y = a.out[0].view(-1)
        y.as_strided((y.numel() + 2,), (1,))[-1] = 5
calls = []
""",
    # past the end on its fifth call: slot 1's first on set 0 (the turns)
    "oob-on-other-set": GOOD + """    calls.append(1)
    if len(calls) == 5:
        y = a.out[0].view(-1)
        y.as_strided((y.numel() + 2,), (1,))[-1] = 5
calls = []
""",
    "fails-later": GOOD + """    calls.append(1)
    return 9 if len(calls) == 3 else 0
calls = []
""",
}


# PyTorch's reference modules may return their outputs (reference role)
KERNELS["returns"] = """
import torch
def ak_kernel(a):
    x, = a.inp
    return torch.softmax(x.float(), dim=-1).to(x.dtype)
"""
KERNELS["returns-f64"] = """
import torch
def ak_kernel(a):
    return torch.softmax(a.inp[0].double(), dim=-1)
"""


def kernel_file(name):
    path = os.path.join(TMP, name + ".py")
    with open(path, "w") as f:
        f.write(KERNELS[name])
    return path


# ---- TAP ----

count, failed = 0, 0


def test(desc, fn):
    global count, failed
    count += 1
    try:
        fn()
        print("ok %d - %s" % (count, desc))
    except Exception as e:
        failed += 1
        print("not ok %d - %s" % (count, desc))
        for line in ("%s: %s" % (type(e).__name__, e)).splitlines():
            print("#   " + line)
    sys.stdout.flush()


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


# ---- the cases ----

R, C = 5, 33
r = Runner()
shm = Shm()
SOFTMAX, END = layout([(F32, [R, C], False), (F32, [R, C], True)])


def load(slot, name):
    return r.ask({"req": "load", "slot": slot, "path": kernel_file(name)})


def call(name, shape=(R, C), dt=F32):
    res = load(0, name)
    expect(res.get("ok"), "load: %s" % res)
    ts, end = layout([(dt, list(shape), False), (dt, list(shape), True)])
    rnd = random.Random(5)
    n = numel(shape)
    shm.mm[0:n * SIZE[dt]] = b"".join(
        struct.pack(FMT[dt], rnd.uniform(-3, 3)) for _ in range(n)) \
        if dt != BF16 else b"".join(struct.pack("<H", bf16_bits(
            rnd.uniform(-3, 3))) for _ in range(n))
    return r.ask(request("call", shm, ts, slot=0)), ts


def test_hello():
    res = r.ask({"req": "hello"})
    expect(res.get("ok") and res.get("backend") == "triton" and
           res.get("abi") == 1 and res.get("name"), res)


def test_good():
    res, ts = call("good")
    expect(res == {"ok": True, "rc": 0, "workspace_bytes": 0}, res)
    o = ts[1]["offset"]
    got = values(shm.mm[o:o + R * C * 4], F32)
    x = values(shm.mm[0:R * C * 4], F32)
    for i in range(R):
        ref = softmax_ref(x[i * C:(i + 1) * C])
        for a, b in zip(got[i * C:(i + 1) * C], ref):
            expect(abs(a - b) <= 1e-6 + 1e-5 * b, "row %d: %r vs %r" %
                   (i, a, b))


def test_half(dt):
    def fn():
        res, ts = call("good", (3, 7), dt)
        expect(res.get("ok") and res.get("rc") == 0 and
               "integrity" not in res, res)
        o = ts[1]["offset"]
        got = values(shm.mm[o:o + 21 * 2], dt)
        expect(abs(sum(got[:7]) - 1) < 2e-2, got)
    return fn


def test_poisoned():
    res, ts = call("nothing")
    o = ts[1]["offset"]
    expect(res.get("ok") and "integrity" not in res, res)
    expect(shm.mm[o:o + R * C * 4] == b"\xff" * (R * C * 4),
           "outputs not poisoned")


def integrity(name, want):
    def fn():
        res, _ = call(name)
        expect(res.get("ok") and want in res.get("integrity", ""), res)
    return fn


def refused(name, want, req="call"):
    def fn():
        if req == "load":
            res = load(0, name)
        else:
            res, _ = call(name)
        expect(not res.get("ok") and want in res.get("error", "") and
               not res.get("fatal"), res)
        again, _ = call("good")
        expect(again.get("ok") and again.get("rc") == 0, again)
    return fn


def test_rc():
    res, _ = call("rc3")
    expect(res.get("ok") and res.get("rc") == 3, res)


def test_talks():
    res, _ = call("talks")
    expect(res.get("ok") and res.get("rc") == 0, res)
    expect("hello from the kernel" in open(r.err).read(), "stderr")


def test_workspace():
    res = load(0, "workspace")
    expect(res == {"ok": True, "workspace": True}, res)
    res, _ = call("workspace")
    expect(res.get("ok") and res.get("workspace_bytes") == 64 * R and
           "integrity" not in res, res)


def test_exit():
    global r
    res = load(0, "exits")
    expect(res.get("ok"), res)
    try:
        call("exits")
        raise AssertionError("the runner answered")
    except EOFError as e:
        expect("7" in str(e), e)
    r = Runner()


def test_gen():
    specs = [(F16, [3, 40], False), (BF16, [50], False), (F32, [7, 9], False),
             (F64, [11], False), (I64, [30], False), (I32, [13], False)]
    gens = [{"kind": "normal", "mean": 0, "sd": 1},
            {"kind": "normal", "mean": 1, "sd": 0.125},
            {"kind": "normal", "mean": 0, "sd": 4},
            {"kind": "normal", "mean": 0.1, "sd": 0.5},
            {"kind": "index", "n": 32000}, {"kind": "index", "n": 7}]
    ts, end = layout(specs)
    shm.mm[0:end] = b"\0" * end
    seed = 0xFEDCBA9876543210
    res = r.ask(request("gen", shm, ts, gen=gens, seed=seed - (1 << 64)))
    expect(res == {"ok": True}, res)
    for i, ((dt, shape, _), t, g) in enumerate(zip(specs, ts, gens)):
        n, o = numel(shape), t["offset"]
        want = gen_bytes(g, dt, seed, i, 0, n)
        expect(shm.mm[o:o + n * SIZE[dt]] == want,
               "tensor %d: %s vs %s" % (i, values(shm.mm[o:o + 8 * SIZE[dt]],
                                                  dt), values(want[:8 * SIZE[dt]], dt)))


def test_gen_big():
    # past one chunk of the runner's loop: the index keeps counting
    n = (1 << 24) + 3
    path, size = os.path.join(TMP, "big"), 2 * n + 4096
    with open(path, "wb") as f:
        f.truncate(size)
    ts, _ = layout([(F16, [n], False)])
    g = {"kind": "normal", "mean": 0, "sd": 1}
    res = r.ask({"req": "gen", "shm": path, "size": size, "tensors": ts,
                 "gen": [g], "seed": 3})
    expect(res == {"ok": True}, res)
    with open(path, "rb") as f:
        f.seek(2 * (n - 5))
        tail = f.read(10)
    os.unlink(path)
    expect(tail == gen_bytes(g, F16, 3, 0, n - 5, 5), "the last elements")


class Parent:
    """The benchmark's other side: picks rows after each call line and
    checks them against the regenerated inputs and their fp64 softmax."""

    def __init__(self, seed, check_offset, check_bytes, stop_at=None,
                 lockstep=False):
        self.seed, self.co, self.cb = seed, check_offset, check_bytes
        self.stop_at, self.lockstep = stop_at, lockstep
        self.bad = {}           # slot -> first call it failed
        self.calls = []
        self.rnd = random.Random(1)

    def run(self, req):
        r.send(req)
        gen = {"kind": "normal", "mean": 0, "sd": 1}
        while True:
            line = r.line()
            if "call" not in line:
                return line
            k, slot = line["call"], line["slot"]
            self.calls.append((k, slot))
            expect(line["seed"] & M64 == call_seed(self.seed, k),
                   "call %d's seed" % k)
            expect(line["us"] >= 0, line)
            rows = [self.rnd.randrange(R), R - 1]
            spans = [[t, row * C, C] for row in rows for t in (0, 1)]
            stop = self.stop_at is not None and k == self.stop_at
            r.send({"spans": spans, "stop": stop} if stop else
                   {"spans": spans})
            expect(r.line() == {"copied": k}, "copied")
            off = self.co + (self.cb if k % 2 else 0)
            for row in rows:
                x = shm.mm[off:off + 4 * C]
                y = values(shm.mm[off + 4 * C:off + 8 * C], F32)
                off += 8 * C
                expect(x == gen_bytes(gen, F32, line["seed"] & M64, 0,
                                      row * C, C), "call %d: inputs" % k)
                ref = softmax_ref(values(x, F32))
                if any(not abs(a - b) <= 1e-5 for a, b in zip(y, ref)):
                    self.bad.setdefault(slot, k)
            if self.lockstep:
                r.send({"next": True})


def bench(names, **kw):
    for i, name in enumerate(names):
        res = load(i, name)
        expect(res.get("ok"), res)
    co = END
    req = request("bench", shm, SOFTMAX, slots=list(range(len(names))),
                  gen=[{"kind": "normal", "mean": 0, "sd": 1}], seed=42,
                  warmup=2, iters=5, min_iters=2, budget_ms=0,
                  copy_bytes=2 * R * C * 4, check_offset=co,
                  check_bytes=16 * C * 4, lockstep=kw.pop("lockstep", False))
    p = Parent(42, co, 16 * C * 4, lockstep=req["lockstep"], **kw)
    return p.run(req), p


def test_bench():
    res, p = bench(["good", "good"])
    expect(res.get("ok") and res.get("rc") == 0 and res.get("calls") == 14,
           res)
    expect(sorted(res["times"]) == ["0", "1", "copy"] and
           all(len(v) == 5 for v in res["times"].values()), res)
    # the rounds take turns at going first (warm-up rounds 0 and 1, then
    # timed rounds 0 to 4), and on the sets: slot i on set (i + r // 2) % 2
    expect([k for k, _ in p.calls] == list(range(14)) and
           [s for _, s in p.calls] == [0, 1, 1, 0] * 3 + [0, 1], p.calls)
    expect(res.get("positions") == {"0": [0, 1, 0, 1, 0],
                                    "1": [1, 0, 1, 0, 1]} and
           res.get("sets") == {"0": [0, 0, 1, 1, 0], "1": [1, 1, 0, 0, 1]},
           res)
    expect(not p.bad, "a good kernel failed a check: %s" % p.bad)


def test_bench_lockstep():
    res, p = bench(["good"], lockstep=True)
    expect(res.get("ok") and res.get("calls") == 7 and not p.bad, res)


def test_bench_stop():
    res, p = bench(["good", "good"], stop_at=4)
    expect(res.get("ok") and res.get("calls") == 5 and len(p.calls) == 5,
           res)


def caught(names, slot, call_k):
    def fn():
        res, p = bench(names)
        expect(res.get("ok"), res)
        expect(p.bad.get(slot) == call_k and len(p.bad) == 1,
               "failed calls: %s" % p.bad)
    return fn


def test_bench_oob():
    res, p = bench(["good", "late-oob"])
    expect(res.get("ok") and res.get("slot") == 1 and
           "wrote outside output 0: 5 bytes after the end" in
           res.get("integrity", ""), res)


def test_bench_oob_other_set():
    res, p = bench(["good", "oob-on-other-set"])
    expect(res.get("ok") and res.get("slot") == 1 and
           "wrote outside output 0" in res.get("integrity", ""), res)


def test_bench_rc():
    res, p = bench(["good", "fails-later"])
    expect(res == {"ok": True, "rc": 9, "slot": 1}, res)
    expect(len(p.calls) == 5, p.calls)


def test_bench_raise():
    res, p = bench(["raise"])
    expect(not res.get("ok") and "ZeroDivisionError" in res["error"], res)


def test_warm():
    load(0, "good")
    case = {"tensors": [{"dtype": F16, "shape": [3, 7]},
                        {"dtype": F16, "shape": [3, 7], "out": True}],
            "label": "3x7 f16"}
    res = r.ask({"req": "warm", "slot": 0, "cases": [case, case]})
    expect(res.get("ok") and res.get("cases") == 2, res)
    load(0, "raise")
    res = r.ask({"req": "warm", "slot": 0, "cases": [case]})
    expect(not res.get("ok") and res.get("case") == 0 and
           res["error"].startswith("at 3x7 f16: ak_kernel() raised "
                                   "ZeroDivisionError"), res)


def test_ceilings():
    res = r.ask({"req": "ceilings"}, timeout=300)
    expect(res.get("ok") and res.get("copy_gbps", 0) > 0 and
           res["matrix_tflops"]["bf16"] > 0, res)


def test_errors():
    for req, want in [({"req": "nonsense"}, "unknown request"),
                      ({}, "without 'req'"),
                      ({"req": "call", "slot": 7}, "no kernel loaded"),
                      ({"req": "load", "slot": 9, "path": "x"},
                       "bad load request")]:
        res = r.ask(req)
        expect(not res.get("ok") and want in res.get("error", ""), res)
    r.send("not json")      # a JSON string, not a request
    res = r.line()
    expect(not res.get("ok"), res)


def test_returns_refused():
    res, ts = call("returns")
    expect(not res.get("ok") and "TypeError" in res.get("error", ""), res)


def test_reference():
    global r
    r.stop()
    r = Runner(reference=True)
    res = r.ask({"req": "hello"})
    expect(res.get("ok") and res.get("reference") == "torch" and
           "compile" in res, res)
    res, ts = call("returns")
    expect(res == {"ok": True, "rc": 0, "workspace_bytes": 0}, res)
    o = ts[1]["offset"]
    got = values(shm.mm[o:o + R * C * 4], F32)
    x = values(shm.mm[0:R * C * 4], F32)
    ref = softmax_ref(x[:C])
    expect(all(abs(a - b) <= 1e-6 for a, b in zip(got[:C], ref)),
           "the returned tensor is the output")
    res, ts = call("returns-f64")
    expect(not res.get("ok") and "the reference returned torch.float64 "
           "[5, 33] for output 0, which is torch.float32 [5, 33]" in
           res.get("error", ""), res)
    res, p = bench(["returns"])
    expect(res.get("ok") and res.get("rc") == 0 and not p.bad, (res, p.bad))


test("hello: the device, backend triton, ABI 1", test_hello)
test("call: a correct kernel, every row checked", test_good)
test("call: f16 and bf16 views", test_half(F16))
test("call: bf16", test_half(BF16))
test("outputs are poisoned: a kernel that writes nothing", test_poisoned)
test("guard band: a write past the output",
     integrity("after", "wrote outside output 0: 1 bytes after the end"))
test("guard band: a write before the output",
     integrity("before", "wrote outside output 0: 1 bytes before the start"))
test("input check: a kernel that modifies its input",
     integrity("scribble", "modified input 0 at element 3"))
test("an exception is an error reply, and the runner goes on",
     refused("raise", "ak_kernel() raised ZeroDivisionError"))
test("a non-zero return is the kernel's rc", test_rc)
test("a kernel's print goes to stderr, not the protocol", test_talks)
test("workspace: sized by ak_workspace_size(), guarded", test_workspace)
test("workspace: a write past it",
     integrity("ws-over", "wrote outside its workspace: 1 bytes after"))
test("workspace: an absurd size is refused",
     refused("ws-absurd", "absurd size"))
test("load: a syntax error", refused("syntax", "SyntaxError", "load"))
test("load: no ak_kernel()", refused("no-entry", "does not define", "load"))
test("load: an exception at import",
     refused("import-raises", "ValueError: no such weights", "load"))
test("a kernel that exits the process ends the runner", test_exit)
test("gen: the generator's bytes in every dtype, as the doc has them",
     test_gen)
test("gen: past the runner's chunk", test_gen_big)
test("bench: fresh inputs for every call, every output checked", test_bench)
test("bench: lockstep", test_bench_lockstep)
test("bench: the parent stops it", test_bench_stop)
test("bench: a kernel that remembers results is caught at its second call",
     caught(["good", "remembers"], 1, 2))
test("bench: a kernel that works only on its first calls is caught",
     caught(["tires"], 0, 3))
test("bench: a write past the output during timing", test_bench_oob)
test("bench: a write outside a set the other kernel runs on next is laid "
     "on the kernel that made it", test_bench_oob_other_set)
test("bench: a non-zero return ends it", test_bench_rc)
test("bench: an exception ends it", test_bench_raise)
test("warm: the JIT compile step, and its failure names the case",
     test_warm)
test("ceilings", test_ceilings)
test("bad requests are errors", test_errors)
test("a kernel returns no tensor: that is a reference's", test_returns_refused)
test("reference role: a returned tensor is the output, copied after the "
     "timed interval, of the output's dtype and shape", test_reference)

r.stop()
print("1..%d" % count)
if failed:
    print("# failed %d of %d" % (failed, count))
sys.exit(1 if failed else 0)
