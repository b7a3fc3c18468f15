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
import collections
import os
import time

import torch

# A kernel's work on a stream of its own, past the timed stream's end
# event, shows as the device-wide synchronize waiting longer after its
# calls than after the runner's own copy's: by more than this (the
# medians), its calls are charged what they waited beyond (see
# charge_escapes).
ESCAPE_US = 50.0

# The delay queued ahead of every timed call (CudaDevice.timer_start):
# twice the longest host-side launch of the last DELAY_WINDOW calls,
# within these bounds.  Work a kernel queues on a stream of its own can
# run on the SMs the delay leaves free, before the start event: the
# bound keeps that window at 1 ms (honest launches take 30 to 220 us).
DELAY_MIN_US = 100.0
DELAY_MAX_US = 1000.0
DELAY_WINDOW = 16

# torch.cuda._sleep counts SM clock cycles: at 2 GHz, more than any
# current GPU's clock, a cycle is at most half a nanosecond
SLEEP_CYCLES_PER_US = 2000


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


_trace = [None]


def tracing():
    return bool(os.environ.get("AUTOKERNEL_TRACE"))


def trace(line):
    """A line in $AUTOKERNEL_TRACE, as lib/trace.c writes them."""
    if _trace[0] is None:
        try:
            _trace[0] = os.open(os.environ.get("AUTOKERNEL_TRACE", ""),
                                os.O_WRONLY | os.O_APPEND | os.O_CREAT,
                                0o644)
        except OSError:
            _trace[0] = -1
    if _trace[0] >= 0:
        t = time.clock_gettime(time.CLOCK_MONOTONIC)
        os.write(_trace[0], ("%.6f %d triton-runner: %s\n"
                                % (t, os.getpid(), line))
                 .encode()[:1000])


def first_line(e):
    lines = str(e).strip().splitlines()
    return lines[0] if lines else type(e).__name__


def median(v):
    return sorted(v)[len(v) // 2]


def charge_escapes(times, excesses, control):
    """
    A kernel's timed calls (times, with each call's excess_us) as the
    benchmark reports them, given the excesses of the runner's own copy
    in the same loop (control; none: an idle device's, 0).  When the
    kernel's median excess is more than ESCAPE_US above the copy's, it
    queues work on a stream of its own that outlasts its end event, and
    each call is charged what its synchronize waited beyond the copy's
    median: the work's end, as near as the host can see it.  Else the
    times stand: one slow synchronize is the host's noise, not the
    kernel's work, and a kernel that escapes on fewer than half its
    calls does not move its median.  Returns (times, the median excess
    above the copy's).
    """
    if not times:
        return times, 0.0
    base = median(control) if control else 0.0
    over = median(excesses) - base
    if over <= ESCAPE_US:
        return times, over
    return [us + max(0.0, e - base) for us, e in zip(times, excesses)], over


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
        self.props = torch.cuda.get_device_properties(self.dev)
        l2 = getattr(self.props, "L2_cache_size", 0)
        self.flush_buf = self.alloc(max(2 * l2, 64 << 20))
        self.flush_value = 0
        self.timer_init()
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
            self.restore_stream()

    def restore_stream(self):
        """The runner's stream current again (a kernel may have left
        another one current)."""
        torch.cuda.set_stream(self.stream)

    def lost(self):
        """Whether the context is gone (errors that poison it repeat)."""
        try:
            torch.cuda.synchronize(self.dev)
            torch.zeros(1, device=self.dev).add_(1).item()
            return False
        except RuntimeError:
            return True

    def timer_init(self):
        """The timer's events and the host's recent launch times."""
        self.events = [torch.cuda.Event(enable_timing=True)
                       for _ in range(2)]
        self.launches = collections.deque(maxlen=DELAY_WINDOW)
        self.launched = 0.0
        self.excess_us = 0.0

    def timer_start(self):
        """
        Queues a delay, then the start event, and notes the host's clock.
        Python takes tens of microseconds to launch a kernel (a Triton
        launch, PyTorch's dispatch): were the device idle meanwhile, that
        idle time would sit between the start event and the kernel and be
        timed as the kernel's.  The delay keeps the device busy until the
        launch is queued: twice the longest launch of the last calls.
        """
        torch.cuda._sleep(int(self.delay_us() * SLEEP_CYCLES_PER_US))
        self.events[0].record(self.stream)
        self.launched = time.perf_counter()

    def delay_us(self):
        longest = max(self.launches) if self.launches else 0.0
        return min(max(2 * longest, DELAY_MIN_US), DELAY_MAX_US)

    def timer_stop(self, what="call"):
        """
        The time from the start event to the end event, which is queued on
        the stream right after the call, with no host round trip inside
        the measurement.  torch's streams do not wait for one another (no
        legacy default stream to end on, as the C runner does), so a
        kernel may have queued work on a stream of its own: once the end
        event has completed, the device-wide synchronize is timed on the
        host, and again at once, on a device surely idle.  What the first
        waited beyond the second is self.excess_us.  It is not judged
        here, call by call: in the runner's process the first synchronize
        after an event's waits 20 to 100 us longer than the second even
        when nothing is left to run (an H200, 2026-12-04), the same after
        the runner's own copy, which never escapes.  The benchmark judges
        a kernel's excesses against its copy's (charge_escapes).
        """
        start, stop = self.events
        stop.record(self.stream)
        host_us = (time.perf_counter() - self.launched) * 1e6
        delay = self.delay_us()
        self.launches.append(host_us)
        try:
            stop.synchronize()
        except RuntimeError as e:
            self.restore_stream()
            raise DeviceError("kernel: %s" % first_line(e), self.lost())
        t = time.perf_counter()
        self.sync()
        t1 = time.perf_counter()
        self.sync()
        waited_us = (t1 - t) * 1e6
        idle_us = (time.perf_counter() - t1) * 1e6
        self.excess_us = waited_us - idle_us
        us = start.elapsed_time(stop) * 1e3
        if tracing():
            trace("timer: %s %.2f us (host launch %.1f us under a delay of "
                  "%.0f, the synchronize waited %.1f us, then %.1f idle)"
                  % (what, us, host_us, delay, waited_us, idle_us))
        return us

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

    def restore_stream(self):
        pass

    def lost(self):
        return False

    def timer_start(self):
        self.t0 = time.perf_counter()

    def timer_stop(self, what="call"):
        self.excess_us = 0.0
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
