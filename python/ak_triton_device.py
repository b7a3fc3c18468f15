"""
ak_triton_device.py: the device of the Triton runner (ak_runner_triton.py),
what backends/dev.h is to the C runners: memory, copies, synchronization,
the L2 flush, timing and the ceilings.  Two of them, picked by
$AUTOKERNEL_TRITON_DEVICE:

    cuda (the default)  torch.cuda on device 0; needs triton, except
                        for PyTorch's reference modules (need_triton)
    fake                CPU tensors and a wall clock: every check of the
                        runner runs, on a machine with no GPU (the tests)

Memory is flat torch.uint8 tensors; the runner makes the typed views.  A
failure raises DeviceError; its .sticky says the context is lost (an
illegal address on a GPU), after which the runner answers "fatal" and
exits, and the parent starts a fresh one.
"""
import os
import time

import torch

# The device was still busy this long after the timed stream's end event:
# the kernel queued work elsewhere, and its time is the one to the
# device-wide synchronize (see CudaDevice.timer_stop).
ESCAPE_US = 50.0


class DeviceError(Exception):
    def __init__(self, message, sticky=False):
        super().__init__(message)
        self.sticky = sticky


def open_device(need_triton=True):
    kind = os.environ.get("AUTOKERNEL_TRITON_DEVICE", "cuda")
    if kind == "cuda":
        return CudaDevice(need_triton)
    if kind == "fake":
        return FakeDevice()
    raise DeviceError("unknown AUTOKERNEL_TRITON_DEVICE '%s' (cuda, fake)"
                      % kind)


def first_line(e):
    lines = str(e).strip().splitlines()
    return lines[0] if lines else type(e).__name__


def median(v):
    return sorted(v)[len(v) // 2]


class Memory:
    """What both devices do alike: memory is torch tensors on self.dev,
    copies are torch's (synchronous to and from the host's memory)."""

    def alloc(self, n):
        return torch.empty(n, dtype=torch.uint8, device=self.dev)

    def h2d(self, dst, src):
        dst.copy_(src)

    def d2h(self, dst, src):
        dst.copy_(src)

    def to_host(self, src):
        return src.to("cpu", copy=True)

    def fill(self, t, byte):
        t.fill_(byte)

    def copy(self, dst, src):
        dst.copy_(src)

    def flush_cache(self):
        """Evicts the last-level cache: a buffer twice its size written."""
        self.flush_value = (self.flush_value + 1) % 256
        self.flush_buf.fill_(self.flush_value)


class CudaDevice(Memory):
    """Device 0 through torch.cuda.  Everything the runner queues, and the
    kernel's launches, go to one stream of its own (made torch's current
    stream), in order."""

    def __init__(self, need_triton=True):
        self.triton_version = None
        try:
            import triton
            self.triton_version = triton.__version__
        except ImportError as e:
            if need_triton:
                raise DeviceError("cannot import triton: %s" % e)
        if not torch.cuda.is_available():
            raise DeviceError("no CUDA device (torch %s sees none)"
                              % torch.__version__)
        self.dev = torch.device("cuda", 0)
        torch.cuda.set_device(self.dev)
        self.stream = torch.cuda.Stream(self.dev)
        torch.cuda.set_stream(self.stream)
        self.events = [torch.cuda.Event(enable_timing=True)
                       for _ in range(3)]
        self.props = torch.cuda.get_device_properties(self.dev)
        l2 = getattr(self.props, "L2_cache_size", 0)
        self.flush_buf = self.alloc(max(2 * l2, 64 << 20))
        self.flush_value = 0
        # the ceilings' f32 rate is plain f32, as the C runner's
        torch.backends.cuda.matmul.allow_tf32 = False

    def info(self):
        p = self.props
        d = {"name": p.name, "arch": "sm_%d%d" % (p.major, p.minor),
             "sms": p.multi_processor_count,
             "l2_bytes": getattr(p, "L2_cache_size", 0),
             "memory_bytes": p.total_memory,
             "warp_size": getattr(p, "warp_size", 32),
             "torch": torch.__version__}
        if self.triton_version:
            d["triton"] = self.triton_version
        if torch.version.cuda:
            major, minor = torch.version.cuda.split(".")[:2]
            d["runtime_version"] = int(major) * 1000 + int(minor) * 10
        d.update(driver_info())
        return d

    def sync(self):
        """The device-wide synchronize; a kernel's errors surface here."""
        try:
            torch.cuda.synchronize(self.dev)
        except RuntimeError as e:
            raise DeviceError("kernel: %s" % first_line(e), self.lost())
        finally:
            # a kernel may have left another stream current
            torch.cuda.set_stream(self.stream)

    def lost(self):
        """Whether the context is gone (errors that poison it repeat)."""
        try:
            torch.cuda.synchronize(self.dev)
            torch.zeros(1, device=self.dev).add_(1).item()
            return False
        except RuntimeError:
            return True

    def timer_start(self):
        self.events[0].record(self.stream)

    def timer_stop(self):
        """
        The time from the start event to the end of the call.  The end is
        the event queued on the stream right after the call, with no host
        round trip inside the measurement; then the device-wide
        synchronize and a third event.  torch's streams do not wait for
        one another (no legacy default stream to end on, as the C runner
        does), so a kernel that queued work on a stream of its own shows
        as a device still busy after the second event: the time is then
        the one to the third, which includes that work.
        """
        start, stop, after = self.events
        stop.record(self.stream)
        self.sync()
        after.record(self.stream)
        after.synchronize()
        us = start.elapsed_time(stop) * 1e3
        us_all = start.elapsed_time(after) * 1e3
        return us if us_all - us <= ESCAPE_US else us_all

    def ceilings(self):
        n = 1 << 30
        a, b = self.alloc(n), self.alloc(n)
        a.fill_(1)
        t = []
        for _ in range(9):
            self.timer_start()
            b.copy_(a)
            t.append(self.timer_stop())
        del a, b
        rates = {"f16": self.mm_tflops(torch.float16, 8192),
                 "bf16": self.mm_tflops(torch.bfloat16, 8192),
                 "f32": self.mm_tflops(torch.float32, 4096)}
        return {"copy_gbps": 2.0 * n / (median(t) * 1e3),
                "matrix_tflops": rates,
                "matrix_method": "torch.mm (cuBLAS), 8192^3 "
                                 "(f32: 4096^3, no tf32)"}

    def mm_tflops(self, dtype, n):
        # random-looking data: zeros run measurably faster
        a = torch.randn(n, n, device=self.dev).to(dtype)
        b = torch.randn(n, n, device=self.dev).to(dtype)
        t = []
        for i in range(10):
            self.timer_start()
            torch.mm(a, b)
            us = self.timer_stop()
            if i >= 3:
                t.append(us)
        return 2.0 * n ** 3 / (median(t) * 1e6)


def driver_info():
    """The kernel driver's version from /proc, and the driver API's."""
    d = {}
    try:
        with open("/proc/driver/nvidia/version") as f:
            words = f.readline().split("Kernel Module", 1)[1].split()
        ver = [w for w in words if w.replace(".", "").isdigit()]
        if ver:
            d["driver"] = ver[0]
    except (OSError, IndexError):
        pass
    try:
        import ctypes
        v = ctypes.c_int()
        if not ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(
                ctypes.byref(v)):
            d["driver_version"] = v.value
    except (OSError, AttributeError):
        pass
    return d


class FakeDevice(Memory):
    """The device on the CPU: the runner's checks run as on a GPU, the
    kernels are plain torch code, the clock is the host's."""

    stream = None
    dev = torch.device("cpu")

    def __init__(self):
        self.flush_buf = torch.empty(4 << 20, dtype=torch.uint8)
        self.flush_value = 0
        self.t0 = 0.0

    def info(self):
        return {"name": "fake device (CPU)", "arch": "fake",
                "torch": torch.__version__}

    def sync(self):
        pass

    def lost(self):
        return False

    def timer_start(self):
        self.t0 = time.perf_counter()

    def timer_stop(self):
        return (time.perf_counter() - self.t0) * 1e6

    def ceilings(self):
        n = 32 << 20
        a, b = torch.ones(n, dtype=torch.uint8), self.alloc(n)
        t = []
        for _ in range(5):
            self.timer_start()
            b.copy_(a)
            t.append(self.timer_stop())
        m = torch.randn(256, 256)
        self.timer_start()
        torch.mm(m, m)
        rate = 2.0 * 256 ** 3 / (max(self.timer_stop(), 1.0) * 1e6)
        return {"copy_gbps": 2.0 * n / (median(t) * 1e3),
                "matrix_tflops": {"f16": rate, "bf16": rate, "f32": rate},
                "matrix_method": "torch.mm on the CPU, 256^3 (fake)"}
