"""Timing done right, in one place: nothing else in hpml-lab reads a clock around device work.

GPU work is asynchronous: a host clock around it measures the launch, not the
work. Intervals here are taken with CUDA events on a CUDA device (read after a
synchronize) and with perf_counter on the CPU, where work is synchronous.

    from hpml_lab.profiling import DeviceTimer, repeat_timed, summarize
    t = DeviceTimer(device)
    t.start(); step(); t.stop()
    t.total()            # seconds, synchronized
    summarize([0.11, 0.12, 0.10])   # {'n': 3, 'median': ..., 'iqr': ..., ...}

EpochMemory is the memory beside the clocks: train() starts it with each epoch and writes what it read into
epochs.csv (MEMORY_COLUMNS).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable

import torch


def synchronize(device: torch.device | str) -> None:
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class DeviceTimer:
    """Accumulates intervals of device work.

    On CUDA each start/stop records an event pair on the current stream; the
    elapsed times are read (after one synchronize) only when asked, so timing
    adds no synchronization to the hot path. On CPU it is perf_counter.
    """

    def __init__(self, device: torch.device | str):
        self.device = torch.device(device)
        self.cuda = self.device.type == "cuda"
        self._pairs: list = []
        self._t0: float | None = None
        self._start_event = None
        self._cpu: list[float] = []

    def start(self) -> None:
        if self.cuda:
            self._start_event = torch.cuda.Event(enable_timing=True)
            self._start_event.record()
        else:
            self._t0 = time.perf_counter()

    def stop(self) -> None:
        if self.cuda:
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            self._pairs.append((self._start_event, end))
        else:
            self._cpu.append(time.perf_counter() - self._t0)

    def intervals(self) -> list[float]:
        """Every interval in seconds (synchronizes once on CUDA)."""
        if self.cuda:
            if self._pairs:
                self._pairs[-1][1].synchronize()
            return [a.elapsed_time(b) / 1000.0 for a, b in self._pairs]
        return list(self._cpu)

    def total(self) -> float:
        return sum(self.intervals())

    def reset(self) -> None:
        self._pairs.clear()
        self._cpu.clear()


class StepClock:
    """Device time of a training loop's steps, taken one of two ways.

    every=0 (the lab's baseline path): an event pair around every step (DeviceTimer), each step its own time.
    every=k (the fast path): events only at the loop's start, after every k-th step and at its end, so a GPU
    step pays one event record in k and the host records nothing else per step; each step gets its interval's
    mean, and an interval holds everything the device did in it (a tensor loader's batch preparation
    included). Read (one synchronize) only by step_times(), after the loop."""

    def __init__(self, device: torch.device | str, every: int = 0):
        self.timer = DeviceTimer(device)
        self.every = every
        self.counts: list[int] = []  # steps in each closed interval (every > 0)
        self.n = 0

    def begin(self) -> None:
        if self.every:
            self.timer.start()

    def step_start(self) -> None:
        if not self.every:
            self.timer.start()

    def step_stop(self) -> None:
        self.n += 1
        if not self.every:
            self.timer.stop()
        elif self.n % self.every == 0:
            self.timer.stop()
            self.counts.append(self.every)
            self.timer.start()

    def end(self) -> None:
        if self.every:
            self.timer.stop()
            self.counts.append(self.n - sum(self.counts))

    def step_times(self) -> list[float]:
        """Seconds per step, in order (each step of an interval its interval's mean)."""
        seconds = self.timer.intervals()
        if not self.every:
            return seconds
        out: list[float] = []
        for t, k in zip(seconds, self.counts):
            if k:  # the last interval is empty when the steps end on a boundary
                out += [t / k] * k
        return out


class HostTimer:
    """Wall-clock intervals of host-side waiting (e.g. on a DataLoader); no device work inside."""

    def __init__(self) -> None:
        self.values: list[float] = []
        self._t0 = 0.0

    def start(self) -> None:
        self._t0 = time.perf_counter()

    def stop(self) -> float:
        dt = time.perf_counter() - self._t0
        self.values.append(dt)
        return dt

    def total(self) -> float:
        return sum(self.values)


class WallClock:
    """Elapsed wall time of a whole region, synchronized with the device at both ends."""

    def __init__(self, device: torch.device | str):
        self.device = torch.device(device)
        self._t0 = 0.0

    def start(self) -> None:
        synchronize(self.device)
        self._t0 = time.perf_counter()

    def stop(self) -> float:
        synchronize(self.device)
        return time.perf_counter() - self._t0


def repeat_timed(
    fn: Callable[[], object],
    device: torch.device | str = "cpu",
    repeats: int = 5,
    warmup: int = 1,
    before: Callable[[], object] | None = None,
) -> list[float]:
    """Run fn warmup times untimed, then `repeats` times, each synchronized; seconds per run. `before` runs
    untimed ahead of each timed run (a barrier, so every rank starts a timed collective together)."""
    clock = WallClock(device)
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(repeats):
        if before is not None:
            before()
        clock.start()
        fn()
        out.append(clock.stop())
    return out


def interleaved_timed(
    fns: list[Callable[[], object]],
    device: torch.device | str = "cpu",
    repeats: int = 5,
    warmup: int = 1,
    on_round: Callable[[int, list[list[float]]], None] | None = None,
) -> list[list[float]]:
    """Time several variants taking turns: `warmup` untimed rounds, then `repeats` rounds in which
    every fn runs once, synchronized, the order rotated each round so none always runs first.

    On a shared machine the load drifts; taking turns spreads that drift over all variants instead
    of biasing whichever ran during a busy minute. Returns seconds per call, one list per fn.
    """
    clock = WallClock(device)
    for _ in range(warmup):
        for fn in fns:
            fn()
    out: list[list[float]] = [[] for _ in fns]
    for r in range(repeats):
        order = list(range(len(fns)))
        for k in order[r % len(fns) :] + order[: r % len(fns)]:
            clock.start()
            fns[k]()
            out[k].append(clock.stop())
        if on_round is not None:
            on_round(r, out)
    return out


def summarize(values: Iterable[float]) -> dict[str, float]:
    """n, median, spread (interquartile range, min, max), mean and standard deviation."""
    v = sorted(float(x) for x in values)
    if not v:
        return {
            "n": 0,
            "median": float("nan"),
            "q1": float("nan"),
            "q3": float("nan"),
            "iqr": float("nan"),
            "min": float("nan"),
            "max": float("nan"),
            "mean": float("nan"),
            "std": float("nan"),
        }
    q = statistics.quantiles(v, n=4, method="inclusive") if len(v) > 1 else [v[0]] * 3
    return {
        "n": len(v),
        "median": statistics.median(v),
        "q1": q[0],
        "q3": q[2],
        "iqr": q[2] - q[0],
        "min": v[0],
        "max": v[-1],
        "mean": statistics.fmean(v),
        "std": statistics.stdev(v) if len(v) > 1 else 0.0,
    }


MEMORY_COLUMNS = ["peak_allocated_mb", "peak_reserved_mb", "alloc_retries", "peak_rss_mb"]
MEMORY_NOTE = (
    "peak_allocated_mb / peak_reserved_mb: the CUDA caching allocator's peaks within the epoch (peak "
    "statistics reset at its start); alloc_retries: times in the epoch the allocator freed its cache and "
    "retried a failed allocation (a sign of memory pressure); all three NaN on CPU. peak_rss_mb: this "
    "process's peak resident memory within the epoch (Linux: the high-water mark reset at its start through "
    "/proc/self/clear_refs; DataLoader workers are other processes and not counted); where it cannot be "
    "reset it is the process's high-water mark since it started (ru_maxrss), and meta.json's memory_note "
    "says so."
)


class EpochMemory:
    """Peak memory of one epoch, as torchtitan's memory monitor reads it: start() resets the peaks, read()
    gives the MEMORY_COLUMNS values since then. `rss_per_epoch` says whether peak_rss_mb is the epoch's own
    peak."""

    def __init__(self, device: torch.device | str):
        self.device = torch.device(device)
        self.cuda = self.device.type == "cuda"
        self.retries0 = 0
        self.rss_per_epoch = self._reset_rss()

    @staticmethod
    def _reset_rss() -> bool:
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # resets VmHWM to the current RSS (Linux 4.0 and later)
            return True
        except OSError:
            return False

    def start(self) -> None:
        if self.cuda:
            torch.cuda.reset_peak_memory_stats(self.device)
            self.retries0 = torch.cuda.memory_stats(self.device).get("num_alloc_retries", 0)
        if self.rss_per_epoch:
            self.rss_per_epoch = self._reset_rss()

    def read(self) -> dict[str, float]:
        row: dict[str, float] = dict.fromkeys(MEMORY_COLUMNS, float("nan"))  # not measured here
        if self.cuda:
            stats = torch.cuda.memory_stats(self.device)
            row.update(
                peak_allocated_mb=stats.get("allocated_bytes.all.peak", 0) / 2**20,
                peak_reserved_mb=stats.get("reserved_bytes.all.peak", 0) / 2**20,
                alloc_retries=stats.get("num_alloc_retries", 0) - self.retries0,
            )
        row["peak_rss_mb"] = _peak_rss_mb(self.rss_per_epoch)
        return row


def _peak_rss_mb(from_proc: bool) -> float:
    if from_proc:
        try:
            with open("/proc/self/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1]) / 1024  # kB
        except OSError:
            pass
    try:
        import resource
        import sys

        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kB on Linux, bytes on macOS
        return rss / 2**20 if sys.platform == "darwin" else rss / 1024
    except (ImportError, OSError):
        return float("nan")
