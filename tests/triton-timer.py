#!/usr/bin/env python3
"""
triton-timer.py DEVICE_MODULE: the Triton runner's CUDA timer
(CudaDevice.timer_start and timer_stop in python/ak_triton_device.py) on a
simulated GPU; TAP on stdout.  torch.cuda's events, streams, _sleep and
synchronize are replaced by a model of one device with a clock: work
queued on a stream starts when the host has queued it and the stream's
previous work is done, an event's time is when its stream reaches it, and
the host's clock moves with the launches and waits it makes.  The model
has the costs measured on an H200 (the runner, 2026-12-04): a launch
from Python takes tens of microseconds, and the first device-wide
synchronize after work costs the host 20 to 150 us even when nothing is
left to run (a second one, at once, about 10).  The benchmark's side
(charge_escapes) is run as the runner's Bench does: a kernel's calls
judged against the runner's own copy's in the same loop.
"""
import importlib.util
import random
import sys
import types

import torch

spec = importlib.util.spec_from_file_location("dev", sys.argv[1])
D = importlib.util.module_from_spec(spec)
spec.loader.exec_module(D)


class Gpu:
    """The device and the host's clock, in microseconds."""

    def __init__(self, sync_cost):
        self.host = 0.0
        self.streams = {}
        self.sync_cost = sync_cost      # the first synchronize after work
        self.dirty = False              # work queued since the last one

    def queue(self, stream, us):
        start = max(self.host, self.streams.get(stream, 0.0))
        self.streams[stream] = start + us
        self.dirty = True
        return start + us

    def wait_until(self, t, cost):
        self.host = max(self.host, t) + cost


class Event:
    def __init__(self, enable_timing=False):
        self.t = None

    def record(self, stream):
        self.t = gpu.queue(stream, 0.0)

    def synchronize(self):
        gpu.wait_until(self.t, 3.0)

    def elapsed_time(self, other):
        return (other.t - self.t) / 1e3           # ms, as torch's


def synchronize(dev=None):
    cost = gpu.sync_cost() if gpu.dirty else 10.0
    gpu.dirty = False
    gpu.wait_until(max(gpu.streams.values(), default=0.0), cost)


def sleep(cycles):
    gpu.host += 4.0
    gpu.queue("timed", cycles / D.SLEEP_CYCLES_PER_US)


torch.cuda.Event = Event
torch.cuda.synchronize = synchronize
torch.cuda.set_stream = lambda s: None
torch.cuda._sleep = sleep
D.time = types.SimpleNamespace(perf_counter=lambda: gpu.host / 1e6)
D.tracing = lambda: False


def device():
    dev = object.__new__(D.CudaDevice)
    dev.stream, dev.dev = "timed", "cuda:0"
    dev.timer_init()
    return dev


def kernel(us, launch_us, side_us=0.0):
    """A launch: the host busy launch_us, then us of work on the timed
    stream (and side_us on a stream of the kernel's own, not waited for)."""
    def run():
        gpu.host += launch_us
        if side_us:
            gpu.queue("side", side_us)
        gpu.queue("timed", us)
    return run


def times(dev, run, n=60, excess=None):
    out = []
    for _ in range(n):
        gpu.queue("timed", 30.0)            # the L2 flush
        dev.timer_start()
        run()
        out.append(dev.timer_stop())
        if excess is not None:
            excess.append(dev.excess_us)
    return out


def bench(dev, run, n=60):
    """The runner's Bench: rounds of a kernel call and a copy (the
    runner's own work), the kernel's times charged as it reports them."""
    t, e, ce = [], [], []
    copy = kernel(3.0, 10.0)
    for _ in range(n):
        t += times(dev, run, 1, e)
        times(dev, copy, 1, ce)
    return D.charge_escapes(t, e, ce)[0]


def median(v):
    return sorted(v)[len(v) // 2]


def old_rule(dev, run, n=60):
    """The rule before 2026-12-04: the end event after the device-wide
    synchronize when that came more than 50 us after the call's end."""
    out = []
    start, stop, after = Event(), Event(), Event()
    for _ in range(n):
        gpu.queue("timed", 30.0)
        start.record(dev.stream)
        run()
        stop.record(dev.stream)
        synchronize()
        after.record(dev.stream)
        after.synchronize()
        us = start.elapsed_time(stop) * 1e3
        us_all = start.elapsed_time(after) * 1e3
        out.append(us if us_all - us <= 50 else us_all)
    return out


n = failed = 0


def check(ok, what, detail=""):
    global n, failed
    n += 1
    failed += not ok
    print("%sok %d - %s" % ("" if ok else "not ", n, what))
    if not ok:
        print("#   %s" % detail)


rng = random.Random(7)
# the synchronize's cost as in the reference runner's trace: a median
# near 60 us, one in ten far above
slow_sync = (lambda: rng.uniform(40, 80) if rng.random() < 0.9
             else rng.uniform(100, 200))

gpu = Gpu(slow_sync)
t = old_rule(device(), kernel(5.0, 20.0))
check(median(t) > 50, "the old rule took the synchronize's cost for a "
      "kernel's (this model reproduces the H200's inflated times)",
      "median %.2f us" % median(t))

gpu = Gpu(slow_sync)
e = []
t = times(device(), kernel(5.0, 20.0), excess=e)
high = [x for x in e if x > D.ESCAPE_US]
check(len(high) > len(e) // 4, "a rule call by call would charge the "
      "host's noise (session 7's: the excess over ESCAPE_US)",
      "%d of %d calls over" % (len(high), len(e)))
check(set(t) == {5.0}, "the timer's own figure is the events': exact",
      str(sorted(set(t))[:5]))

gpu = Gpu(slow_sync)
t = bench(device(), kernel(5.0, 20.0))
check(set(t) == {5.0},
      "a 5 us kernel is 5 us however long the synchronize takes",
      "%s" % sorted(set(t))[:5])
gpu = Gpu(lambda: 25.0)
t = times(device(), kernel(5.0, 20.0))
check(set(t) == {5.0}, "with a steady synchronize, every call is exact",
      str(sorted(set(t))))

# a launch longer than the least delay: the first calls wait for it,
# then the delay covers it
gpu = Gpu(lambda: 25.0)
dev = device()
t = times(dev, kernel(5.0, 300.0), n=20)
check(t[0] > 5.0 and set(t[1:]) == {5.0},
      "a 300 us launch is timed once, then hidden by a longer delay",
      "%s, delay %.0f us" % (t[:4], dev.delay_us()))
check(dev.delay_us() >= 600.0, "the delay is twice the longest launch",
      "%.0f us" % dev.delay_us())

# and it shrinks again once the long launches are past
t = times(dev, kernel(5.0, 20.0), n=D.DELAY_WINDOW + 1)
check(dev.delay_us() == D.DELAY_MIN_US,
      "the delay returns to its least once the long launches are past",
      "%.0f us" % dev.delay_us())

# work on a stream of the kernel's own, past the timed stream's end
gpu = Gpu(slow_sync)
t = bench(device(), kernel(5.0, 20.0, side_us=2000.0))
check(min(t) >= 2000.0 - 200.0,
      "work queued on a stream of the kernel's own is in its time",
      "min %.2f us" % min(t))

gpu = Gpu(lambda: 25.0)
t = bench(device(), kernel(5.0, 20.0, side_us=400.0))
# all of it but what ran beside the delay, before the start event (the
# hole doc/triton.md names): here the delay's least and the flush
beside = D.DELAY_MIN_US + 30.0
check(median(t) >= 400.0 - beside - 10.0,
      "and 400 us of it, with a steady synchronize",
      "median %.2f us" % median(t))

# on most calls only: the median is charged
gpu = Gpu(slow_sync)
flip = random.Random(3)


def sometimes():
    kernel(5.0, 20.0, side_us=400.0 if flip.random() < 0.7 else 0.0)()


t = bench(device(), sometimes)
check(median(t) >= 400.0 - beside - 10.0, "work on its own stream in 7 calls of 10 is "
      "charged", "median %.2f us" % median(t))

print("1..%d" % n)
sys.exit(1 if failed else 0)
